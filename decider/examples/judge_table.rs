//! Prints the judge's tables as markdown, for docs/architecture.md (a test checks the doc holds
//! them; `NISH_BLESS_DOCS=1 cargo test -p nish-decider --lib policy` rewrites them): every tool
//! in every session state, then the judgement's terms on every kind of fact.

fn main() {
    print!("{}", nish_decider::policy::table::table_markdown());
    println!();
    print!("{}", nish_decider::policy::table::terms_markdown());
}
