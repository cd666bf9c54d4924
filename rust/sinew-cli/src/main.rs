//! `sinew`: solve and check Sinew IK problem files from the shell.
//!
//! ```text
//! sinew solve PROBLEM.json [--method NAME] [--iterations N] [--tolerance T]
//!                          [--stall-tolerance T] [--output FILE] [--require-reached]
//! sinew check PROBLEM.json [--json]
//! sinew --version | --help
//! ```
//!
//! `PROBLEM.json` may be `-` for standard input. Exit status: 0 success, 1 a bad or unreadable
//! problem file, 2 a bad command line, 3 `--require-reached` and some goal was not reached.
//!
//! The arguments are parsed by hand: two subcommands and a handful of options do not justify
//! clap's compile time on the 2-core machines this project builds on.

use std::io::{Read, Write};
use std::process::ExitCode;

use sinew::format::ProblemFile;
use sinew::{LoadedProblem, Method, RootMode, SolutionFile};

const USAGE: &str = "\
usage: sinew solve PROBLEM.json [options]   solve and print the solution as JSON
       sinew check PROBLEM.json [--json]    validate; print sub-bases and the bones each goal moves
       sinew --version | --help

PROBLEM.json is a \"sinew.problem/1\" file (\"sinew.problem/2\" with goal kinds), or - for
standard input.

solve options (override the file's \"settings\"):
  --method NAME          solver method (fabrik, dls, fabrik_classic, ccd, triangulation,
                         jacobian_transpose, jacobian_pinv, svd_dls, sdls, nlp)
  --iterations N         iteration cap, >= 1
  --tolerance T          distance at which a goal counts as reached, > 0
  --stall-tolerance T    stop when no effector moves more than this per iteration, >= 0
  --output FILE          write the solution to FILE instead of standard output
  --require-reached      exit with status 3 if some goal is not reached

exit status: 0 ok, 1 bad problem file, 2 bad command line, 3 not reached (--require-reached)";

/// What went wrong, and the exit status it maps to.
#[derive(Debug)]
enum Failure {
    /// A bad command line (exit 2).
    Usage(String),
    /// A bad or unreadable problem file, or a failed solve (exit 1).
    Problem(String),
    /// `--require-reached` and a goal was not reached (exit 3).
    NotReached(String),
}

impl Failure {
    fn code(&self) -> u8 {
        match self {
            Self::Problem(_) => 1,
            Self::Usage(_) => 2,
            Self::NotReached(_) => 3,
        }
    }
}

#[derive(Debug, Default)]
struct SolveArgs {
    path: String,
    method: Option<Method>,
    iterations: Option<u32>,
    tolerance: Option<f64>,
    stall_tolerance: Option<f64>,
    output: Option<String>,
    require_reached: bool,
}

#[derive(Debug)]
enum Command {
    Solve(SolveArgs),
    Check { path: String, json: bool },
    Help,
    Version,
}

fn parse_args(args: &[String]) -> Result<Command, Failure> {
    let usage = |msg: String| Failure::Usage(msg);
    let Some((cmd, rest)) = args.split_first() else {
        return Err(usage("no command given".into()));
    };
    match cmd.as_str() {
        "-h" | "--help" | "help" => return Ok(Command::Help),
        "-V" | "--version" | "version" => return Ok(Command::Version),
        "solve" | "check" => {}
        other => return Err(usage(format!("unknown command \"{other}\" (expected solve or check)"))),
    }
    let mut path = None;
    let mut solve = SolveArgs::default();
    let mut json = false;
    let mut it = rest.iter();
    while let Some(arg) = it.next() {
        // `--name=value` and `--name value` are both accepted.
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_owned())),
            _ => (arg.as_str(), None),
        };
        let mut value = |what: &str| -> Result<String, Failure> {
            inline.clone().or_else(|| it.next().cloned()).ok_or_else(|| usage(format!("{name} needs {what}")))
        };
        match (cmd.as_str(), name) {
            ("solve", "--method") => {
                let v = value("a method name")?;
                solve.method = Some(Method::from_name(&v).map_err(|e| usage(format!("--method: {e}")))?);
            }
            ("solve", "--iterations") => {
                let v = value("a number")?;
                solve.iterations = Some(v.parse().map_err(|_| usage(format!("--iterations: \"{v}\" is not a whole number")))?);
            }
            ("solve", "--tolerance") => solve.tolerance = Some(parse_f64(name, &value("a number")?)?),
            ("solve", "--stall-tolerance") => solve.stall_tolerance = Some(parse_f64(name, &value("a number")?)?),
            ("solve", "--output" | "-o") => solve.output = Some(value("a file name")?),
            ("solve", "--require-reached") if inline.is_none() => solve.require_reached = true,
            ("check", "--json") if inline.is_none() => json = true,
            (_, "-h" | "--help") => return Ok(Command::Help),
            (_, n) if n.starts_with('-') && n != "-" => return Err(usage(format!("unknown option {arg} for {cmd}"))),
            _ if path.is_none() => path = Some(arg.clone()),
            _ => return Err(usage(format!("unexpected argument \"{arg}\" (one problem file at a time)"))),
        }
    }
    let path = path.ok_or_else(|| usage(format!("{cmd} needs a problem file (or - for standard input)")))?;
    Ok(match cmd.as_str() {
        "solve" => Command::Solve(SolveArgs { path, ..solve }),
        _ => Command::Check { path, json },
    })
}

fn parse_f64(name: &str, v: &str) -> Result<f64, Failure> {
    v.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .ok_or_else(|| Failure::Usage(format!("{name}: \"{v}\" is not a finite number")))
}

/// Reads and validates a problem file. Messages start with the file name; JSON syntax errors
/// give `file:line:column`, as compilers do.
fn load(path: &str) -> Result<LoadedProblem, Failure> {
    let name = if path == "-" { "<stdin>" } else { path };
    let text = if path == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).map_err(|e| Failure::Problem(format!("{name}: cannot read: {e}")))?;
        s
    } else {
        std::fs::read_to_string(path).map_err(|e| Failure::Problem(format!("{name}: cannot read: {e}")))?
    };
    let file: ProblemFile = serde_json::from_str(&text).map_err(|e| {
        let msg = e.to_string();
        // serde_json appends " at line L column C"; the location goes up front instead.
        let msg = msg.split(" at line ").next().unwrap_or(&msg);
        Failure::Problem(format!("{name}:{}:{}: {msg}", e.line(), e.column()))
    })?;
    file.check_format().map_err(|e| {
        let msg = e.to_string();
        let msg = msg.strip_prefix("problem file: ").unwrap_or(&msg);
        Failure::Problem(format!("{name}: {msg}"))
    })?;
    // An unknown name is reported as such (the core only says the parent is not earlier). A set
    // keeps this linear: a scan per bone took 20 s on a 100 000-bone chain.
    let names: std::collections::HashSet<&str> = file.bones.iter().map(|b| b.name.as_str()).collect();
    for b in &file.bones {
        if let Some(parent) = &b.parent
            && !names.contains(parent.as_str()) {
                return Err(Failure::Problem(format!("{name}: bone \"{}\": unknown parent bone \"{parent}\"", b.name)));
            }
    }
    file.load().map_err(|e| {
        let msg = e.to_string();
        let msg = msg.strip_prefix("problem file: ").unwrap_or(&msg);
        Failure::Problem(format!("{name}: {msg}"))
    })
}

fn solve(args: &SolveArgs) -> Result<(), Failure> {
    let lp = load(&args.path)?;
    let method = args.method.unwrap_or(lp.method);
    let mut settings = lp.settings;
    if let Some(n) = args.iterations {
        settings.max_iterations = n;
    }
    if let Some(t) = args.tolerance {
        settings.tolerance = t;
    }
    if let Some(t) = args.stall_tolerance {
        settings.stall_tolerance = t;
    }
    let mut solver = method.solver(settings).map_err(|e| Failure::Usage(e.to_string()))?;
    let solution = solver.solve(&lp.problem, &lp.pose).map_err(|e| Failure::Problem(format!("{}: {e}", args.path)))?;
    // Never print a non-finite number (serde_json would write `null`).
    sinew::format::check_solution_finite(&solution).map_err(|e| Failure::Problem(format!("{}: {e}", args.path)))?;
    let file = SolutionFile::new(lp.problem.rig(), method, &solution);
    let value = serde_json::to_value(&file).map_err(|e| Failure::Problem(format!("cannot write JSON: {e}")))?;
    let text = pretty(&value);
    match &args.output {
        Some(out) => std::fs::write(out, &text).map_err(|e| Failure::Problem(format!("{out}: cannot write: {e}")))?,
        None => std::io::stdout().write_all(text.as_bytes()).map_err(|e| Failure::Problem(format!("stdout: {e}")))?,
    }
    if args.require_reached && !solution.reached {
        return Err(Failure::NotReached(format!(
            "{}: not every goal was reached ({} after {} iterations, worst residual {})",
            args.path,
            solution.stop.name(),
            solution.iterations,
            solution.worst_residual()
        )));
    }
    Ok(())
}

fn check(path: &str, json: bool) -> Result<(), Failure> {
    let lp = load(path)?;
    let p = &lp.problem;
    let rig = p.rig();
    let name = |i: usize| rig.bone(i).name.as_str();
    let topo = p.topology();
    let root = match p.root() {
        RootMode::Pinned => "pinned",
        RootMode::Free => "free",
    };
    let out = if json {
        let goals: Vec<serde_json::Value> = p
            .goals()
            .iter()
            .zip(&topo.moved)
            .map(|(g, moved)| {
                serde_json::json!({
                    "bone": name(g.bone),
                    "target": g.target.to_array(),
                    "moves": moved.iter().map(|&i| name(i)).collect::<Vec<_>>(),
                })
            })
            .collect();
        let v = serde_json::json!({
            "file": path,
            "valid": true,
            "bones": rig.bones().iter().map(|b| b.name.as_str()).collect::<Vec<_>>(),
            "root": root,
            "method": lp.method.name(),
            "settings": lp.settings,
            "sub_bases": topo.sub_bases.iter().map(|&i| name(i)).collect::<Vec<_>>(),
            "stretch": rig.bones().iter().filter(|b| b.limit.stretch > 0.0).map(|b| (b.name.clone(), serde_json::json!(b.limit.stretch))).collect::<serde_json::Map<_, _>>(),
            "goals": goals,
        });
        pretty(&v)
    } else {
        let mut s = format!("{path}: ok\n");
        s += &format!(
            "  {} bones, {} goals, root {root}, method {} (max {} iterations, tolerance {})\n",
            rig.len(),
            p.goals().len(),
            lp.method.name(),
            lp.settings.max_iterations,
            lp.settings.tolerance
        );
        let subs: Vec<&str> = topo.sub_bases.iter().map(|&i| name(i)).collect();
        s += &format!("  sub-bases: {}\n", if subs.is_empty() { "none".to_owned() } else { subs.join(", ") });
        let stretchy: Vec<String> = rig.bones().iter().filter(|b| b.limit.stretch > 0.0).map(|b| format!("{} ({})", b.name, b.limit.stretch)).collect();
        if !stretchy.is_empty() {
            s += &format!("  stretch: {}\n", stretchy.join(", "));
        }
        for (gi, (g, moved)) in p.goals().iter().zip(&topo.moved).enumerate() {
            let t = g.target;
            let bones: Vec<&str> = moved.iter().map(|&i| name(i)).collect();
            s += &format!("  goal {gi} ({} -> [{}, {}, {}]) moves: {}\n", name(g.bone), t.x, t.y, t.z, bones.join(", "));
        }
        s
    };
    std::io::stdout().write_all(out.as_bytes()).map_err(|e| Failure::Problem(format!("stdout: {e}")))
}

/// The order keys are written in (serde_json's map is sorted; people read `format` first).
/// Keys not listed follow in alphabetical order.
const KEY_ORDER: [&str; 19] = [
    "format", "file", "valid", "method", "bones", "root", "settings", "sub_bases", "stretch", "goals", "bone", "target", "moves",
    "rotations", "root_translation", "scales", "residuals", "iterations", "reached",
];

/// Pretty JSON that keeps arrays of plain values on one line, so a pose reads one quaternion per
/// line.
fn pretty(v: &serde_json::Value) -> String {
    fn go(v: &serde_json::Value, indent: usize, out: &mut String) {
        use serde_json::Value;
        let pad = |n: usize| "  ".repeat(n);
        match v {
            Value::Array(items) if items.iter().all(|x| !x.is_array() && !x.is_object()) => {
                out.push_str(&serde_json::to_string(v).unwrap_or_default().replace(',', ", "));
            }
            Value::Array(items) if !items.is_empty() => {
                out.push_str("[\n");
                for (i, x) in items.iter().enumerate() {
                    out.push_str(&pad(indent + 1));
                    go(x, indent + 1, out);
                    out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
                }
                out.push_str(&pad(indent));
                out.push(']');
            }
            Value::Object(map) if !map.is_empty() => {
                out.push_str("{\n");
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_by_key(|(k, _)| KEY_ORDER.iter().position(|o| o == k).unwrap_or(KEY_ORDER.len()));
                for (i, (k, x)) in entries.into_iter().enumerate() {
                    out.push_str(&pad(indent + 1));
                    out.push_str(&serde_json::to_string(k).unwrap_or_default());
                    out.push_str(": ");
                    go(x, indent + 1, out);
                    out.push_str(if i + 1 < map.len() { ",\n" } else { "\n" });
                }
                out.push_str(&pad(indent));
                out.push('}');
            }
            _ => out.push_str(&serde_json::to_string(v).unwrap_or_default()),
        }
    }
    let mut out = String::new();
    go(v, 0, &mut out);
    out.push('\n');
    out
}

fn run(args: &[String]) -> Result<(), Failure> {
    match parse_args(args)? {
        Command::Help => {
            println!("{USAGE}");
            Ok(())
        }
        Command::Version => {
            println!("sinew {}", sinew::VERSION);
            Ok(())
        }
        Command::Solve(a) => solve(&a),
        Command::Check { path, json } => check(&path, json),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            match &f {
                Failure::Usage(m) => eprintln!("sinew: {m}\nTry 'sinew --help'."),
                Failure::Problem(m) | Failure::NotReached(m) => eprintln!("sinew: error: {m}"),
            }
            ExitCode::from(f.code())
        }
    }
}
