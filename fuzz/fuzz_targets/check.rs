// Shared by the targets (included, not a module of its own): the check every input gets. It is
// the same check `rust/sinew/tests/hardening.rs` replays on `fuzz/regressions/` with stable Rust.

/// Raw bytes into the JSON loader; a problem that loads is solved with `method` from its start
/// pose and, when that succeeds, from the solution (the warm-started tracking case). Panics (the
/// fuzzer's crash) on a panic inside Sinew, or a solution that is not finite with unit
/// quaternions: finite input must never give a non-finite pose.
pub fn check(data: &[u8], method: sinew::Method) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(lp) = sinew::Problem::from_json(text) else { return };
    let Ok(mut solver) = method.solver(lp.settings) else { return };
    let mut start = lp.pose.clone();
    for _ in 0..2 {
        let Ok(sol) = solver.solve(&lp.problem, &start) else { return };
        if let Err(e) = sinew::format::check_solution_finite(&sol) {
            panic!("{}: {e}", method.name());
        }
        for q in &sol.pose.rotations {
            assert!((q.length() - 1.0).abs() < 1e-9, "{}: rotation {q:?} is not unit", method.name());
        }
        start = sol.pose;
    }
}
