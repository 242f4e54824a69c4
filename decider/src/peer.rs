//! Who is on the other end of a host connection, as the kernel tells it.
//!
//! A host runs its own `nish-mcp` as a child process and speaks MCP to it over stdio, so the
//! shim's parent is the host. The consent dialog shows the host's executable and pid from here,
//! beside the name the host claims for itself.
//!
//! When the host is an interpreter (node, python, deno, bun, java), the executable alone would
//! name every host written in that language alike; the script or package it runs is read from
//! its command line ([`interpreted_script`]) and shown, marked as the process's own claim, and
//! the cooldown keys on it, so that two node-based hosts are told apart.
//!
//! The host is pinned when its shim connects ([`Pinned`]: its pid, start time and
//! executable); before a consent dialog shows, [`Pinned::still`] checks the process is still
//! that one, running that program (a host that forks the shim and then runs another program
//! would otherwise have the dialog name that program). The consent cooldown is keyed by the
//! executable and by the pinned process ([`Pinned::cooldown_keys`]): a new shim, a new host
//! process of the same program, or the same process running another program since, does not
//! reset it.

use nish_proto::wire::indicator::{HostProgram, SCRIPT_CHARS};

/// The most bytes of a command line read (`/proc/<pid>/cmdline`); the rest is not looked at.
const CMDLINE_BYTES: usize = 16 * 1024;

/// The program behind the shim with pid `shim_pid`: its parent's executable and pid. Empty
/// when the shim or its parent cannot be read (gone, another user's, pid 0 or 1).
pub fn host_program(shim_pid: u32) -> HostProgram {
    let Some(ppid) = parent_of(shim_pid) else {
        return HostProgram::default();
    };
    if ppid <= 1 {
        // Orphaned (its host exited) or started by init: there is no host program to name.
        return HostProgram::default();
    }
    let exe = std::fs::read_link(format!("/proc/{ppid}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let script = interpreter(&exe)
        .and_then(|kind| interpreted_script(kind, &cmdline(ppid)))
        .map(|s| keep_end(&s, SCRIPT_CHARS))
        .unwrap_or_default();
    HostProgram {
        exe,
        pid: ppid,
        script,
    }
}

/// The interpreters whose hosts are told apart by what they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interpreter {
    /// node, nodejs
    Node,
    /// bun
    Bun,
    /// deno
    Deno,
    /// python, python3, python3.12, pypy3...
    Python,
    /// java
    Java,
}

/// Which interpreter `exe` is, by its file name.
pub fn interpreter(exe: &str) -> Option<Interpreter> {
    let name = exe.rsplit('/').next().unwrap_or(exe);
    let name = name.strip_suffix(" (deleted)").unwrap_or(name);
    let versioned = |base: &str| {
        name.strip_prefix(base)
            .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.'))
    };
    match name {
        "node" | "nodejs" => Some(Interpreter::Node),
        "bun" => Some(Interpreter::Bun),
        "deno" => Some(Interpreter::Deno),
        "java" => Some(Interpreter::Java),
        _ if versioned("python") || versioned("pypy") => Some(Interpreter::Python),
        _ => None,
    }
}

/// The arguments of process `pid` (empty when it cannot be read).
fn cmdline(pid: u32) -> Vec<String> {
    use std::io::Read as _;
    let mut buf = Vec::new();
    if let Ok(f) = std::fs::File::open(format!("/proc/{pid}/cmdline")) {
        let _ = f.take(CMDLINE_BYTES as u64).read_to_end(&mut buf);
    }
    buf.split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// What an interpreter's command line says it runs: the script (or, for `python -m` and
/// `java -m`, the module; for `npx`, `bunx` and `deno run npm:`, the package; for inline code,
/// `(inline code)`). `None` when nothing is named (an interactive interpreter).
///
/// Options are skipped, with the value of those known to take one as a separate argument.
pub fn interpreted_script(kind: Interpreter, argv: &[String]) -> Option<String> {
    // Options that take the next argument as their value.
    let takes_value: &[&str] = match kind {
        Interpreter::Node => &[
            "-r",
            "--require",
            "--import",
            "--loader",
            "--experimental-loader",
            "-C",
            "--conditions",
            "--env-file",
            "--title",
        ],
        Interpreter::Bun => &["-r", "--preload", "--cwd", "--config", "-c", "--env-file"],
        Interpreter::Deno => &["--config", "-c", "--import-map", "--lock", "--env-file"],
        Interpreter::Python => &["-W", "-X", "-Q"],
        Interpreter::Java => &[
            "-cp",
            "-classpath",
            "--class-path",
            "-p",
            "--module-path",
            "--add-modules",
            "--add-opens",
            "--add-exports",
        ],
    };
    let inline: &[&str] = match kind {
        Interpreter::Node => &["-e", "--eval", "-p", "--print"],
        Interpreter::Bun => &["-e", "--eval", "-p", "--print"],
        Interpreter::Deno => &[],
        Interpreter::Python => &["-c"],
        Interpreter::Java => &[],
    };
    // The word after which the next argument is the module or package named.
    let module_flag: &[&str] = match kind {
        Interpreter::Python => &["-m"],
        Interpreter::Java => &["-m", "--module", "-jar"],
        _ => &[],
    };
    let mut args = argv.iter().skip(1).map(String::as_str);
    let mut positional = Vec::new();
    while let Some(a) = args.next() {
        if a == "--" {
            positional.extend(args.by_ref());
            break;
        }
        if inline.contains(&a) {
            return Some("(inline code)".into());
        }
        if module_flag.contains(&a) {
            return args.next().map(str::to_string);
        }
        // Python joins short options: `-um pkg`, `-Bc code`.
        if kind == Interpreter::Python && a.starts_with('-') && !a.starts_with("--") {
            if a.len() > 2 && a.ends_with('m') {
                return args.next().map(str::to_string);
            }
            if a.len() > 2 && a.ends_with('c') {
                return Some("(inline code)".into());
            }
        }
        if takes_value.contains(&a) {
            args.next();
            continue;
        }
        if a.starts_with('-') {
            continue;
        }
        positional.push(a);
        if positional.len() == 3 {
            break;
        }
        // Only runners look past their first word (`bun run x`, `deno run x`, `npx pkg`).
        if !matches!(
            kind,
            Interpreter::Bun | Interpreter::Deno | Interpreter::Node
        ) {
            break;
        }
        if kind == Interpreter::Node && !is_npx(a) {
            break;
        }
        if matches!(kind, Interpreter::Bun | Interpreter::Deno)
            && !matches!(a, "run" | "x" | "serve" | "task")
        {
            break;
        }
    }
    let first = *positional.first()?;
    match kind {
        // `node /usr/lib/node_modules/npm/bin/npx-cli.js -y @scope/pkg`: the package.
        Interpreter::Node if is_npx(first) => positional
            .get(1)
            .map(|p| format!("{p} (through npx)"))
            .or(Some(first.to_string())),
        Interpreter::Bun | Interpreter::Deno if matches!(first, "run" | "x" | "serve" | "task") => {
            positional.get(1).map(|p| p.to_string())
        }
        _ => Some(first.to_string()),
    }
}

/// npm's `npx` as node runs it (its script's name).
fn is_npx(script: &str) -> bool {
    let name = script.rsplit('/').next().unwrap_or(script);
    matches!(name, "npx" | "npx-cli.js")
}

/// The last `max` characters of `s`, with an ellipsis when cut.
fn keep_end(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        return s.to_string();
    }
    let tail: String = s.chars().skip(n - (max - 1)).collect();
    format!("\u{2026}{tail}")
}

/// The host program as it was when its shim connected.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pinned {
    /// What the dialog shows.
    pub program: HostProgram,
    /// The process's start time (clock ticks after boot, `/proc/<pid>/stat` field 22): a pid
    /// reused by another process has another.
    pub start_time: u64,
}

impl Pinned {
    /// The host of the shim with pid `shim_pid`, now.
    pub fn of_shim(shim_pid: u32) -> Pinned {
        let program = host_program(shim_pid);
        let start_time = start_time(program.pid).unwrap_or(0);
        Pinned {
            program,
            start_time,
        }
    }

    /// True when the pinned process still runs the pinned program: the same start time and
    /// the same executable. A host that could not be read when it connected (pid 0) has nothing
    /// to compare and stays as it was (the dialog says it is unknown).
    pub fn still(&self) -> bool {
        if self.program.pid == 0 {
            return true;
        }
        // As `host_program` reads it: empty when it cannot be read (a kernel thread's).
        let exe = std::fs::read_link(format!("/proc/{}/exe", self.program.pid))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        start_time(self.program.pid) == Some(self.start_time) && exe == self.program.exe
    }

    /// What a denial of this host holds back: its program (for an interpreter, with the
    /// script it runs: another script is another host), and its very process.
    pub fn cooldown_keys(&self) -> [String; 2] {
        let program = if self.program.script.is_empty() {
            format!("exe:{}", self.program.exe)
        } else {
            format!("exe:{}\0script:{}", self.program.exe, self.program.script)
        };
        [
            program,
            format!("process:{}:{}", self.program.pid, self.start_time),
        ]
    }
}

/// A process's start time (`/proc/<pid>/stat` field 22).
fn start_time(pid: u32) -> Option<u64> {
    if pid == 0 {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the parenthesized command name, which may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The parent pid of `pid` (`PPid:` in /proc/<pid>/status).
fn parent_of(pid: u32) -> Option<u32> {
    if pid == 0 {
        return None;
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_a_child_is_its_parent() {
        // This test process plays the host: a child it starts is the "shim".
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep starts");
        let p = host_program(child.id());
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(p.pid, std::process::id());
        let me = std::fs::read_link("/proc/self/exe").unwrap();
        assert_eq!(p.exe, me.to_string_lossy());
    }

    /// A process pinned while it runs one program is not still itself once it runs another
    /// (its shim's parent ran `exec`), nor once it is gone.
    #[test]
    fn a_host_that_runs_another_program_is_not_the_pinned_one() {
        use std::io::{BufRead, BufReader};
        // The host: a shell whose child (the "shim") reads a line, then the shell execs sleep.
        let mut host = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; read x; exec sleep 30"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sh starts");
        let mut out = BufReader::new(host.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let shim: u32 = line.trim().parse().unwrap();
        let pinned = Pinned::of_shim(shim);
        assert_eq!(pinned.program.pid, host.id());
        assert!(pinned.program.exe.ends_with("sh"), "{pinned:?}");
        assert!(pinned.still());
        // The host runs another program.
        use std::io::Write as _;
        writeln!(host.stdin.take().unwrap()).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while pinned.still() {
            assert!(std::time::Instant::now() < deadline, "exec not seen");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // Both keys name what was pinned, not what runs now.
        let keys = pinned.cooldown_keys();
        assert!(
            keys[0].starts_with("exe:") && keys[0].ends_with("sh"),
            "{keys:?}"
        );
        assert_eq!(
            keys[1],
            format!("process:{}:{}", host.id(), pinned.start_time)
        );
        let _ = host.kill();
        let _ = host.wait();
        let _ = std::process::Command::new("kill")
            .arg(shim.to_string())
            .status();
        assert!(!pinned.still(), "a process gone is not the pinned one");
    }

    fn run(exe: &str, args: &[&str]) -> Option<String> {
        let argv: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        interpreted_script(interpreter(exe)?, &argv)
    }

    #[test]
    fn an_interpreter_is_named_with_what_it_runs() {
        let cases: &[(&str, &[&str], Option<&str>)] = &[
            (
                "/usr/bin/node",
                &["node", "/opt/a/index.js"],
                Some("/opt/a/index.js"),
            ),
            (
                "/usr/bin/node",
                &[
                    "node",
                    "--enable-source-maps",
                    "--require",
                    "r.js",
                    "x.mjs",
                    "--port",
                    "1",
                ],
                Some("x.mjs"),
            ),
            (
                "/usr/bin/nodejs",
                &[
                    "node",
                    "/usr/lib/node_modules/npm/bin/npx-cli.js",
                    "-y",
                    "@acme/host",
                    "--x",
                ],
                Some("@acme/host (through npx)"),
            ),
            (
                "/usr/bin/node",
                &["node", "-e", "require('x')"],
                Some("(inline code)"),
            ),
            ("/usr/bin/node", &["node"], None),
            (
                "/usr/bin/python3.11",
                &["python3", "/home/u/host.py", "--flag"],
                Some("/home/u/host.py"),
            ),
            (
                "/usr/bin/python3",
                &["python3", "-u", "-m", "acme_host", "serve"],
                Some("acme_host"),
            ),
            (
                "/usr/bin/python3",
                &["python3", "-um", "acme_host"],
                Some("acme_host"),
            ),
            (
                "/usr/bin/python3",
                &["python3", "-W", "ignore", "x.py"],
                Some("x.py"),
            ),
            (
                "/usr/bin/python3",
                &["python3", "-c", "print(1)"],
                Some("(inline code)"),
            ),
            ("/usr/bin/pypy3", &["pypy3", "h.py"], Some("h.py")),
            (
                "/usr/lib/jvm/bin/java",
                &["java", "-Xmx1g", "-jar", "/opt/host.jar"],
                Some("/opt/host.jar"),
            ),
            (
                "/usr/bin/java",
                &["java", "-cp", "lib/*", "com.acme.Host"],
                Some("com.acme.Host"),
            ),
            (
                "/usr/bin/java",
                &["java", "-m", "acme/com.acme.Host"],
                Some("acme/com.acme.Host"),
            ),
            (
                "/home/u/.bun/bin/bun",
                &["bun", "run", "host.ts"],
                Some("host.ts"),
            ),
            ("/home/u/.bun/bin/bun", &["bun", "host.ts"], Some("host.ts")),
            (
                "/home/u/.bun/bin/bun",
                &["bun", "x", "@acme/host"],
                Some("@acme/host"),
            ),
            (
                "/usr/bin/deno",
                &["deno", "run", "-A", "--config", "d.json", "host.ts"],
                Some("host.ts"),
            ),
            (
                "/usr/bin/deno",
                &["deno", "run", "npm:@acme/host"],
                Some("npm:@acme/host"),
            ),
        ];
        for (exe, argv, want) in cases {
            assert_eq!(run(exe, argv).as_deref(), *want, "{exe} {argv:?}");
        }
        // Not interpreters: named by the executable alone.
        for exe in [
            "/usr/bin/claude",
            "/opt/cursor/cursor",
            "/usr/bin/pythonista",
            "/bin/sh",
        ] {
            assert_eq!(interpreter(exe), None, "{exe}");
        }
        assert_eq!(
            interpreter("/usr/bin/python3.12 (deleted)"),
            Some(Interpreter::Python)
        );
    }

    #[test]
    fn a_long_script_keeps_its_end() {
        let long = format!("/{}/host.js", "d".repeat(400));
        let kept = keep_end(&long, SCRIPT_CHARS);
        assert_eq!(kept.chars().count(), SCRIPT_CHARS);
        assert!(kept.starts_with('\u{2026}') && kept.ends_with("/host.js"));
        assert_eq!(keep_end("a.js", SCRIPT_CHARS), "a.js");
    }

    /// Two hosts of one interpreter running different scripts are two programs: the dialog
    /// names each, and a denial of one does not hold back the other.
    #[test]
    fn two_scripts_of_one_interpreter_are_two_hosts() {
        let dir = std::env::temp_dir().join(format!("nish-peer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut hosts = Vec::new();
        for name in ["host_a.py", "host_b.py"] {
            let script = dir.join(name);
            // The "host" starts its "shim" (sleep) and prints its pid.
            std::fs::write(
                &script,
                "import subprocess, sys, time\n\
                 p = subprocess.Popen(['sleep', '30'])\n\
                 print(p.pid, flush=True)\n\
                 sys.stdin.read()\n\
                 p.kill()\n",
            )
            .unwrap();
            let mut host = std::process::Command::new("python3")
                .arg(&script)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("python3 starts");
            let mut line = String::new();
            std::io::BufRead::read_line(
                &mut std::io::BufReader::new(host.stdout.take().unwrap()),
                &mut line,
            )
            .unwrap();
            let shim: u32 = line.trim().parse().unwrap();
            hosts.push((host, Pinned::of_shim(shim), script));
        }
        let (a, b) = (&hosts[0].1, &hosts[1].1);
        assert_eq!(a.program.exe, b.program.exe, "one interpreter");
        assert_eq!(a.program.script, hosts[0].2.to_string_lossy());
        assert_eq!(b.program.script, hosts[1].2.to_string_lossy());
        assert_ne!(a.cooldown_keys()[0], b.cooldown_keys()[0]);
        for (mut host, _, _) in hosts {
            drop(host.stdin.take());
            let _ = host.wait();
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn unknown_pids_give_nothing() {
        assert_eq!(host_program(0), HostProgram::default());
        assert_eq!(host_program(u32::MAX - 7), HostProgram::default());
    }
}
