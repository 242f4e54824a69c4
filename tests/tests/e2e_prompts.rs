//! The desktop's own prompts are told by their process's executable alone, through the whole
//! real driver (`nish-driver serve --backend linux`, its agents and nish-mcp, driven by the
//! official MCP Python client: tests/e2e/desktop_prompts.py) on a nested private desktop, with
//! one GTK 3 app (tests/apps/prompt_gtk3.py) run twice:
//!
//! - the impostor: a copy of the real Python interpreter named `pinentry-gnome3` (GnuPG's
//!   pinentry, one of `nish_proto::prompts::PROGRAMS`) runs it, calling itself "Notes" in a
//!   window titled "Notes": nothing in its name or title looks like a prompt, only the file name
//!   of its executable (`/proc/<pid>/exe`). It is not offered in the consent dialog though the
//!   host asks for "Notes", not listed, not found by its window id, pid or name
//!   (`window_target_not_found`), and refused when the keyboard focus or a point reaches it
//!   (`app_not_in_scope`); nothing presses its button.
//! - the control: the ordinary interpreter runs it, calling itself `pinentry-gnome3` (the very
//!   file name that makes the impostor a prompt) in a window titled "Authentication Required".
//!   It is offered, granted, listed, read and operated: a prompt's name and title hide nothing.
//!   The control's name is a listed prompt program but not one of `nish_proto::prompts::APPS`,
//!   the accessibility names that hide an app as a second signal (for a prompt run by an
//!   interpreter): a name there, such as `polkit-gnome-authentication-agent-1`, would hide the
//!   control by design, and the test would no longer show that the executable is what decides.
//!
//! Without the decider's executable check (the window lists' `is_system_prompt` and the judge's
//! `is_prompt_exe` given no executable), the impostor is offered as "Notes", granted and
//! listed, and this test fails. Without the window lists' check alone, the impostor is offered
//! and bound, and the judge still keeps it out, but as an app out of scope
//! (`app_not_in_scope`), which the test tells from a window that is not there.

use std::path::{Path, PathBuf};
use std::time::Duration;

use nish_testdesk::session::{python, script, workspace_bin};
use nish_testdesk::{App, Desktop};

/// The real interpreter file (`/usr/bin/python3` is a link to it), which has PyGObject.
fn system_python() -> PathBuf {
    std::fs::canonicalize("/usr/bin/python3").expect("/usr/bin/python3")
}

/// The executable the kernel reports for `pid`.
fn exe_of(pid: u32) -> PathBuf {
    std::fs::read_link(format!("/proc/{pid}/exe")).expect("/proc/<pid>/exe")
}

#[test]
fn the_executable_alone_makes_a_system_prompt_on_a_real_desktop() {
    // Nested: the person has a real device to answer the consent dialog.
    let desk = Desktop::builder()
        .nested(true)
        .start()
        .expect("the test desktop");
    let app = Path::new(env!("CARGO_MANIFEST_DIR")).join("apps/prompt_gtk3.py");
    let interpreter = system_python();
    let bin = desk.dir().join("impostor-bin");
    std::fs::create_dir_all(&bin).expect("a directory for the impostor");
    // A copy, not a link: the kernel reports the file a process runs, a link's target.
    let impostor_exe = bin.join("pinentry-gnome3");
    std::fs::copy(&interpreter, &impostor_exe).expect("the interpreter copied");
    let pressed = |who: &str| desk.dir().join(format!("{who}-pressed"));
    let run = |program: &Path, name: &str, title: &str, who: &str| {
        let h = desk
            .spawn(App::Command {
                program: program.to_path_buf(),
                args: vec![
                    app.clone().into(),
                    "--name".into(),
                    name.into(),
                    "--title".into(),
                    title.into(),
                    "--pressed".into(),
                    pressed(who).into(),
                ],
            })
            .unwrap_or_else(|e| panic!("the {who}: {e:#}"));
        let on_bus = desk
            .wait_atspi_app(h.pid, Duration::from_secs(45))
            .unwrap_or_else(|e| panic!("the {who} on the registry: {e:#}"));
        // What the test is about: the name the app gives itself on the accessibility bus.
        assert_eq!(on_bus.name, name, "the {who}'s accessible name");
        h
    };
    let impostor = run(&impostor_exe, "Notes", "Notes", "impostor");
    let control = run(
        &interpreter,
        "pinentry-gnome3",
        "Authentication Required",
        "control",
    );
    // The executables the broker will read: the prompt's file name, and the interpreter.
    assert_eq!(exe_of(impostor.pid), impostor_exe);
    assert_eq!(exe_of(control.pid), interpreter);
    assert!(nish_proto::prompts::is_prompt_exe(
        &impostor_exe.to_string_lossy()
    ));
    assert!(!nish_proto::prompts::is_prompt_exe(
        &interpreter.to_string_lossy()
    ));
    assert!(!nish_proto::prompts::is_prompt_app("pinentry-gnome3"));
    assert!(!nish_proto::prompts::is_prompt_app("Notes"));

    let mut cmd = desk.command(python().expect("python with the MCP SDK"));
    cmd.arg(script("desktop_prompts.py"))
        .arg("--driver")
        .arg(workspace_bin("nish-driver").expect("nish-driver"))
        .arg("--shim")
        .arg(workspace_bin("nish-mcp").expect("nish-mcp"))
        .arg("--impostor-pid")
        .arg(impostor.pid.to_string())
        .arg("--impostor-window")
        .arg(impostor.window_id.to_string())
        .arg("--impostor-pressed")
        .arg(pressed("impostor"))
        .arg("--control-pid")
        .arg(control.pid.to_string())
        .arg("--control-window")
        .arg(control.window_id.to_string())
        .arg("--control-pressed")
        .arg(pressed("control"));
    let o = cmd.output().expect("python runs");
    let stdout = nish_testdesk::session::passed(&o, "the host side");
    for case in ["consent_dialog", "impostor", "control"] {
        assert!(stdout.contains(&format!("PASSED {case}")), "{stdout}");
    }
    println!("{stdout}");
}
