//! Prints the judge's permission table (every tool in every session state) as markdown, for
//! docs/architecture.md (a test checks the doc holds it).

fn main() {
    print!("{}", nish_broker::policy::table_markdown());
}
