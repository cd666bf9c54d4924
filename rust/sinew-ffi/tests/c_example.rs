//! Builds `ffi/example.c` with the system C compiler against the library `cargo test` just
//! built, runs it, checks its output against the core, and runs it under valgrind. Also checks
//! that the header compiles cleanly as C99, C11 and C++.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sinew_core::Problem;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// target/<profile>/deps, where `cargo test` leaves libsinew.so and libsinew.a.
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    assert!(deps.join("libsinew.so").exists(), "libsinew.so not built in {}", deps.display());
    deps
}

/// A fresh directory per test (tests run in parallel and clean up after themselves).
fn scratch_dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sinew-ffi-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Whether `tool` is on PATH. A developer without it is told and the test skips; in CI (`CI`
/// set, as `.ci/run` runs) a missing tool fails the test, so the C example and its valgrind run
/// can never pass there without running (`scripts/bootstrap.sh` installs valgrind).
fn have_or_skip(tool: &str, what: &str) -> bool {
    if have(tool) {
        return true;
    }
    assert!(std::env::var_os("CI").is_none(), "`{tool}` is not on PATH in CI: {what} cannot run");
    eprintln!("NOTICE: `{tool}` is not on PATH; skipping {what}");
    false
}

/// A command for the built example: without cargo's LD_LIBRARY_PATH, which lists
/// target/<profile> and could load a stale copy of libsinew.so left there by `cargo build`.
fn example(exe: &Path) -> Command {
    let mut cmd = Command::new(exe);
    cmd.env_remove("LD_LIBRARY_PATH");
    cmd
}

#[track_caller]
fn run(cmd: &mut Command) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

const WARNINGS: [&str; 4] = ["-Wall", "-Wextra", "-Werror", "-pedantic"];

/// Compiles the example linked to the shared library (with an rpath) or the static one.
fn build_example(dir: &Path, static_link: bool) -> PathBuf {
    let root = repo_root();
    let lib = lib_dir();
    let exe = dir.join(if static_link { "example_static" } else { "example" });
    let mut cmd = Command::new("cc");
    cmd.arg("-std=c99").args(WARNINGS).arg("-I").arg(root.join("ffi")).arg(root.join("ffi/example.c")).arg("-o").arg(&exe);
    if static_link {
        cmd.arg(lib.join("libsinew.a")).args(["-lm", "-lpthread", "-ldl"]);
    } else {
        // A true RPATH (not RUNPATH), so that this very build of the library is loaded.
        cmd.arg("-L").arg(&lib).arg("-lsinew").arg(format!("-Wl,--disable-new-dtags,-rpath,{}", lib.display()));
    }
    run(&mut cmd);
    exe
}

/// (bone name, wxyz) lines and residuals from the example's output.
fn parse(stdout: &str) -> (Vec<(String, [f64; 4])>, Vec<f64>) {
    let mut pose = Vec::new();
    let mut residuals = Vec::new();
    let mut section = "";
    for line in stdout.lines() {
        if line.starts_with("pose") {
            section = "pose";
        } else if line.starts_with("residuals") {
            section = "residuals";
        } else if line.starts_with("  ") && section == "pose" {
            let f: Vec<&str> = line.split_whitespace().collect();
            let q = [1, 2, 3, 4].map(|i| f[i].parse::<f64>().unwrap());
            pose.push((f[0].to_owned(), q));
        } else if line.starts_with("  ") && section == "residuals" {
            residuals.push(line.rsplit(' ').next().unwrap().parse::<f64>().unwrap());
        }
    }
    (pose, residuals)
}

/// The example prints what the core computes (to its 9 printed decimals).
fn check_against_core(stdout: &str, file: &Path) {
    let lp = Problem::from_json(&std::fs::read_to_string(file).unwrap()).unwrap();
    let sol = lp.method.solver(lp.settings).unwrap().solve(&lp.problem, &lp.pose).unwrap();
    let (pose, residuals) = parse(stdout);
    assert_eq!(pose.len(), lp.problem.rig().len(), "{stdout}");
    for (i, (name, q)) in pose.iter().enumerate() {
        assert_eq!(name, &lp.problem.rig().bone(i).name);
        let c = sol.pose.rotations[i];
        for (a, b) in q.iter().zip([c.w, c.x, c.y, c.z]) {
            assert!((a - b).abs() < 1e-8, "{name}: printed {q:?}, core {c:?}");
        }
    }
    assert_eq!(residuals.len(), sol.residuals.len());
    for (a, b) in residuals.iter().zip(&sol.residuals) {
        assert!((a - b).abs() < 1e-8, "residual {a} vs core {b}");
    }
    let status = if sol.reached { "(reached)" } else { "(not reached)" };
    assert!(stdout.lines().nth(1).unwrap().ends_with(status), "{stdout}");
}

#[test]
fn example_c_builds_runs_and_prints_the_core_pose() {
    if !have_or_skip("cc", "the C example test") {
        return;
    }
    let dir = scratch_dir("example");
    let exe = build_example(&dir, false);
    let root = repo_root();

    // Default problem, run from the repo root as the README says.
    let out = run(example(&exe).current_dir(&root));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with(&format!("sinew {}: tests/data/ffi_humanoid13.json", env!("CARGO_PKG_VERSION"))), "{stdout}");
    // Whether it converges is the core's business (its own tests); here the C path must print
    // exactly what the core computes.
    check_against_core(&stdout, &root.join("tests/data/ffi_humanoid13.json"));

    // Every model file given as argv[1].
    for f in ["ffi_chain10.json", "ffi_y_shape.json", "ffi_humanoid13.json"] {
        let path = root.join("tests/data").join(f);
        let out = run(example(&exe).arg(&path));
        check_against_core(&String::from_utf8(out.stdout).unwrap(), &path);
    }

    // Errors: exit 1 with the status name and sinew's message on stderr.
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"format\": \"sinew.problem/1\",\n  \"bones\": [,]}").unwrap();
    for (arg, status, detail) in [
        (bad.to_str().unwrap(), "SINEW_STATUS_PARSE_ERROR", "line 2 column"),
        ("/nonexistent/problem.json", "SINEW_STATUS_IO_ERROR", "/nonexistent/problem.json"),
    ] {
        let out = example(&exe).arg(arg).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(status) && stderr.contains(detail), "{stderr}");
        assert!(out.stdout.is_empty());
    }

    // The static library gives the same program output.
    let static_exe = build_example(&dir, true);
    let out_static = run(example(&static_exe).current_dir(&root));
    assert_eq!(String::from_utf8(out_static.stdout).unwrap(), stdout);

    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn example_c_is_clean_under_valgrind() {
    if !have_or_skip("cc", "the valgrind test") || !have_or_skip("valgrind", "the valgrind run of ffi/example.c") {
        return;
    }
    let dir = scratch_dir("valgrind");
    let exe = build_example(&dir, false);
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"format\": \"sinew.problem/1\", \"bones\": []}").unwrap();
    // A success and an error path (which frees what it allocated on the way out).
    for (arg, want) in [(None, 0), (Some(bad.as_path()), 1)] {
        let mut cmd = Command::new("valgrind");
        cmd.args(["--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=definite,indirect,possible", "-q"])
            .arg(&exe)
            .env_remove("LD_LIBRARY_PATH")
            .current_dir(repo_root());
        if let Some(a) = arg {
            cmd.arg(a);
        }
        let out = cmd.output().expect("run valgrind");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(want), "valgrind reported errors (exit {:?}):\n{stderr}", out.status.code());
        assert!(!stderr.contains("=="), "valgrind said something:\n{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn header_compiles_as_c_and_cpp() {
    let dir = scratch_dir("header");
    let inc = repo_root().join("ffi");
    let src = "#include \"sinew.h\"\nint main(void) { sinew_goal g; (void)g; return (int)SINEW_STATUS_OK; }\n";
    let c = dir.join("h.c");
    std::fs::write(&c, src).unwrap();
    let cpp = dir.join("h.cpp");
    std::fs::write(&cpp, src.replace("main(void)", "main()")).unwrap();
    let mut ran = 0;
    for std in ["-std=c99", "-std=c11"] {
        if have("cc") {
            run(Command::new("cc").arg(std).args(WARNINGS).arg("-fsyntax-only").arg("-I").arg(&inc).arg(&c));
            ran += 1;
        }
    }
    if have("c++") {
        run(Command::new("c++").arg("-std=c++11").args(WARNINGS).arg("-fsyntax-only").arg("-I").arg(&inc).arg(&cpp));
        ran += 1;
    }
    if ran == 0 {
        eprintln!("NOTICE: no C or C++ compiler on PATH; header not compiled");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
