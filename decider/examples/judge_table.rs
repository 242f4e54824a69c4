//! Prints the judge's permission table (every tool in every session state) as markdown, for
//! docs/architecture.md (a test checks the doc holds it).

fn main() {
    print!("{}", nish_decider::policy::table_markdown());
}
