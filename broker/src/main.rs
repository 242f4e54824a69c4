//! `nish-driver`: the broker daemon and its terminal commands (see the library).

fn main() -> std::process::ExitCode {
    nish_driver::main()
}
