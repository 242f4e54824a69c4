//! Prints the audit's table of events as markdown, for docs/audit.md (a test checks the doc
//! holds it).

fn main() {
    print!("{}", nish_decider::audit::AuditEvent::table_markdown());
}
