//! A range of frames in one call ([`solve_sequence`]): what a bake solves.
//!
//! - **With a reference** (the problem's, the rest pose unless set, or one per frame: in a DCC
//!   the pose before IK at that frame), each frame is solved on its own, from its reference, exactly as a solve of that
//!   frame's problem alone ([`solve_frame`]): the natural-poses issue's rule that a bake's frame
//!   is the pose a single solve of that frame gives, as Blender's IK starts every evaluation from
//!   the pose before IK. The answer is a function of the frame alone, so the frames are solved
//!   side by side on up to [`std::thread::available_parallelism`] threads (`SINEW_THREADS` caps
//!   them), each with its own solver of the same method and settings, each taking the next frames
//!   not yet taken; the result does not depend on how many.
//! - **Without one** ([`crate::Reference::LeastMotion`]), the answer is the least motion from the frame before (the tracking case of
//!   the FABRIK report, §4.2): each frame is warm-started from the previous answer, one after
//!   another.

use std::ops::{ControlFlow, Range};
use std::sync::atomic::{AtomicUsize, Ordering};

use glam::{DMat4, DQuat, DVec3};

use super::{Method, Solution, Solver};
use crate::error::{Error, Result};
use crate::pose::Pose;
use crate::problem::{Problem, Reference, RootMode};

/// Per-frame inputs for [`solve_sequence`]: one entry per goal per frame.
#[derive(Debug, Clone, Copy)]
pub struct FrameTargets<'a> {
    /// `targets[f * goals + g]`.
    pub targets: &'a [DVec3],
    /// Optional `orientations[f * goals + g]` (goals without orientation ignore theirs).
    pub orientations: Option<&'a [DQuat]>,
    /// Optional `poles[f * goals + g]` (goals without pole ignore theirs).
    pub poles: Option<&'a [DVec3]>,
    /// Optional per-frame reference poses: `references[f * bones + b]` is bone `b`'s rotation
    /// in frame `f`'s reference ([`Problem::reference`]: in a DCC, the pose before IK at that
    /// frame, its keyed animation). Without it every frame uses the problem's reference.
    pub references: Option<&'a [DQuat]>,
    /// Optional per-frame root translations (rig space, as [`Pose::root_translation`]):
    /// `root_translations[f]` is frame `f`'s reference root translation (where there is a
    /// reference: the problem's, or `references`) and, with [`crate::RootMode::Pinned`], where the
    /// root stays that frame (in a DCC, a keyed root location the
    /// IK must not move). Without it the root stays at the start's (pinned) and every frame uses
    /// the problem's reference root translation.
    pub root_translations: Option<&'a [DVec3]>,
    /// Optional per-frame rest frames of the rig's root bones (those without a parent, in bone
    /// order), as rig-space matrices ([`crate::Rig::set_root_rest`]): `root_rests[f * roots + r]`.
    /// In a DCC, the animated bones above the IK chains at each frame; every other bone keeps its
    /// rest relative to its parent. Without it the rig stays as the problem has it.
    pub root_rests: Option<&'a [DMat4]>,
}

/// The fewest frames a thread of [`solve_sequence`] is given: a thread costs tens of
/// microseconds to start, a frame with a reference about as much or more.
const FRAMES_PER_THREAD: usize = 8;

/// How many frames a thread of [`solve_sequence`] takes at a time: few, so that the threads
/// end a block together, and more than one, so that they seldom meet at the counter.
const FRAMES_PER_TAKE: usize = 2;

/// The frames a thread of [`solve_sequence`] solves before their answers are handed to the sink
/// and the next block starts: a long range then holds one block's answers at a time (the sink
/// keeps what it keeps), at the cost of starting the threads again every block.
const BLOCK_FRAMES_PER_THREAD: usize = 256;

/// Solves a whole range of frames and calls `sink(frame, &solution)` for each, in order.
///
/// - Where there is a reference (the problem's, the rest pose unless set, or `references`), each frame is solved from
///   that frame's reference as a single solve of it would be (module docs): its
///   rotations (and lengths, where it has them) are the start, its root translation too with a
///   free root; a pinned root stays at `root_translations[f]`, else at `start`'s. `start` gives
///   only that, and the lengths where the reference has none. The frames are solved on several
///   threads (`SINEW_THREADS` caps them), the other threads' solvers made by
///   [`Method::from_name`] of `solver`'s [`Solver::name`] with its settings: a solver of one's
///   own that takes a built-in method's name is taken to be that method; any other solves every
///   frame itself.
/// - Without one ([`crate::Reference::LeastMotion`] and no `references`), frame 0 starts from `start` and every later frame from the frame before's
///   answer (the least motion). The bones of a chain with a pole that Blender's IK would keep
///   (no other goal moves them) start every frame from `start` instead, as Blender's IK starts
///   every frame from the pose before IK: the pole's turn is measured on that pose (see
///   [`crate::Pole`]).
///
/// Inputs are validated before any solve. Each bone's quaternion is kept in the hemisphere of
/// the frame before's (frame 0: of `start`'s), so the sequence is sign-continuous.
///
/// # Errors
/// [`Error::ShapeMismatch`] when arrays do not match `frames × goals`, [`Error::BadGoal`] for a
/// non-finite target, or the solver's error (the frames before the one that failed are given
/// to `sink` first).
pub fn solve_sequence(
    solver: &mut dyn Solver,
    problem: &Problem,
    start: &Pose,
    frames: usize,
    inputs: FrameTargets<'_>,
    mut sink: impl FnMut(usize, &Solution),
) -> Result<()> {
    solve_sequence_until(solver, problem, start, frames, inputs, |f, sol| {
        sink(f, sol);
        ControlFlow::Continue(())
    })
    .map(|_| ())
}

/// [`solve_sequence`] whose sink may stop it: once `sink` returns [`ControlFlow::Break`], no
/// frame after that one is handed to it and the call returns `Ok(ControlFlow::Break(()))` as soon
/// as the frames being solved side by side are done (at most a block: a few hundred frames a
/// thread). An interactive caller stops a long range so (the Python module, on Ctrl-C).
///
/// # Errors
/// As [`solve_sequence`].
pub fn solve_sequence_until(
    solver: &mut dyn Solver,
    problem: &Problem,
    start: &Pose,
    frames: usize,
    inputs: FrameTargets<'_>,
    mut sink: impl FnMut(usize, &Solution) -> ControlFlow<()>,
) -> Result<ControlFlow<()>> {
    let roots = check_inputs(problem, frames, &inputs)?;
    let start = problem.checked_pose(start)?;
    let n = problem.rig().len();
    let mut frame = FrameSetter {
        problem: problem.clone(),
        // (Per-frame references give rotations; the root translation stays the problem
        // reference's, or the start's.)
        reference: problem.reference().pose().cloned().unwrap_or_else(|| Pose::new(vec![DQuat::IDENTITY; n], start.root_translation)),
        inputs,
        roots: &roots,
    };
    let mut previous = start.rotations.clone();
    let mut give = |f: usize, mut sol: Solution| {
        for (q, p) in sol.pose.rotations.iter_mut().zip(&previous) {
            if q.dot(*p) < 0.0 {
                *q = -*q;
            }
        }
        let go_on = sink(f, &sol);
        previous.clone_from(&sol.pose.rotations);
        go_on
    };
    if problem.has_reference() || inputs.references.is_some() {
        let threads = thread_cap().min(frames.div_ceil(FRAMES_PER_THREAD)).max(1);
        // (A solver of one of the crate's methods is made again for each other thread; any
        // other solves every frame itself.)
        let mut others: Vec<Box<dyn Solver>> =
            (1..threads).map_while(|_| Method::from_name(solver.name()).and_then(|m| m.solver(*solver.settings())).ok()).collect();
        // (In blocks, so that a long range holds only a block's answers at a time.)
        let block = BLOCK_FRAMES_PER_THREAD * (others.len() + 1);
        for first in (0..frames).step_by(block) {
            let (solved, failed) = solve_apart(solver, &mut others, &frame, &start, first..(first + block).min(frames));
            for (k, sol) in solved.into_iter().enumerate() {
                if give(first + k, sol).is_break() {
                    return Ok(ControlFlow::Break(()));
                }
            }
            if let Some(e) = failed {
                return Err(e);
            }
        }
        return Ok(ControlFlow::Continue(()));
    }
    // Without a reference: warm-started, one frame after another.
    let restart = problem.topology().blender_pole_bones(problem.goals());
    let mut pose = start.clone();
    for f in 0..frames {
        frame.set(f)?;
        for &b in &restart {
            pose.rotations[b] = start.rotations[b];
            if !pose.scales.is_empty() {
                pose.scales[b] = start.scale(b);
            }
            if b == 0 {
                pose.root_translation = start.root_translation;
            }
        }
        if let Some(t) = inputs.root_translations
            && problem.root() == RootMode::Pinned
        {
            pose.root_translation = t[f];
        }
        let sol = solver.solve(&frame.problem, &pose)?;
        pose.clone_from(&sol.pose);
        if give(f, sol).is_break() {
            return Ok(ControlFlow::Break(()));
        }
    }
    Ok(ControlFlow::Continue(()))
}

/// Checks every input of a sequence before any frame is solved, so that a bad frame cannot
/// leave a half-written result; returns the rig's root bones, in bone order.
///
/// # Errors
/// As [`solve_sequence`].
fn check_inputs(problem: &Problem, frames: usize, inputs: &FrameTargets<'_>) -> Result<Vec<usize>> {
    let g = problem.goals().len();
    let check = |what: &str, len: usize| {
        if len == frames * g {
            Ok(())
        } else {
            Err(Error::ShapeMismatch { what: what.into(), expected: frames * g, got: len })
        }
    };
    check("targets (frames × goals)", inputs.targets.len())?;
    if let Some(o) = inputs.orientations {
        check("orientations (frames × goals)", o.len())?;
    }
    if let Some(p) = inputs.poles {
        check("pole targets (frames × goals)", p.len())?;
    }
    let n = problem.rig().len();
    if let Some(r) = inputs.references
        && r.len() != frames * n
    {
        return Err(Error::ShapeMismatch { what: "reference rotations (frames × bones)".into(), expected: frames * n, got: r.len() });
    }
    // (Orientations and poles of goals that have none are ignored, whatever they hold.)
    let bad = |k: usize, what: String| Error::BadGoal { goal: k % g.max(1), reason: format!("{what} at frame {}", k / g.max(1)) };
    if let Some((k, why)) = inputs.targets.iter().enumerate().find_map(|(k, &t)| crate::rig::coordinate_problem(t).map(|why| (k, why))) {
        return Err(bad(k, format!("target {why}")));
    }
    let goals = problem.goals();
    if let Some(o) = inputs.orientations
        && let Some(k) = (0..o.len()).position(|k| goals[k % g].orientation.is_some() && (!o[k].is_finite() || o[k].length() < 1e-9))
    {
        return Err(bad(k, "orientation is not finite (or it has zero length)".into()));
    }
    if let Some(p) = inputs.poles
        && let Some((k, why)) = (0..p.len()).filter(|&k| goals[k % g].pole.is_some()).find_map(|k| crate::rig::coordinate_problem(p[k]).map(|why| (k, why)))
    {
        return Err(bad(k, format!("pole target {why}")));
    }
    if let Some(t) = inputs.root_translations {
        if t.len() != frames {
            return Err(Error::ShapeMismatch { what: "root translations (frames)".into(), expected: frames, got: t.len() });
        }
        for (f, &v) in t.iter().enumerate() {
            crate::rig::check_coordinate(v, || format!("root translation at frame {f}"))?;
        }
    }
    let roots: Vec<usize> = problem.rig().roots().collect();
    if let Some(m) = inputs.root_rests {
        let expected = frames * roots.len();
        if m.len() != expected {
            return Err(Error::ShapeMismatch { what: "root rest matrices (frames × root bones)".into(), expected, got: m.len() });
        }
        // (Each checked on a copy of the rig, so that a bad frame is refused before any is solved.)
        let mut rig = problem.rig().clone();
        for (k, matrix) in m.iter().enumerate() {
            let frame = k / roots.len();
            rig.set_root_rest(roots[k % roots.len()], matrix).map_err(|e| match e {
                Error::NonFinite { what } => Error::NonFinite { what: format!("{what} at frame {frame}") },
                Error::TooLarge { what, value, bound } => Error::TooLarge { what: format!("{what} at frame {frame}"), value, bound },
                Error::NotRigid { bone, deviation, .. } => Error::NotRigid { bone, deviation, frame: Some(frame) },
                other => other,
            })?;
        }
    }
    // (Each as `Problem::checked_pose` checks a pose's rotations.)
    if let Some(r) = inputs.references {
        for (k, &q) in r.iter().enumerate() {
            crate::problem::check_rotation(q, || format!("reference rotation of bone \"{}\" at frame {}", problem.rig().bone(k % n).name, k / n))?;
        }
    }
    Ok(roots)
}

/// A frame of a sequence with a reference solved alone (see [`solve_sequence`]): `frame`'s
/// problem started from its reference (as given, before the problem normalised it: a caller's
/// single solve of the frame starts from the same numbers), at root translation
/// `root_translation` where the root is pinned and that is given.
///
/// # Errors
/// The solver's.
fn solve_frame(solver: &mut dyn Solver, frame: &FrameSetter<'_, '_>, start: &Pose, root_translation: Option<DVec3>) -> Result<Solution> {
    let reference = &frame.reference;
    let root_translation = match frame.problem.root() {
        RootMode::Pinned => root_translation.unwrap_or(start.root_translation),
        RootMode::Free => reference.root_translation,
    };
    let scales = if reference.scales.is_empty() { start.scales.clone() } else { reference.scales.clone() };
    let from = Pose { rotations: reference.rotations.clone(), root_translation, scales };
    solver.solve(&frame.problem, &from)
}

/// What a thread of [`solve_apart`] solved: its frames' answers with their frame numbers, and
/// the frame that failed with its error.
type ThreadFrames = (Vec<(usize, Solution)>, Option<(usize, Error)>);

/// Frames `frames` of `frame`'s sequence, each solved alone ([`solve_frame`]), side by side:
/// by `solver` and, on threads of their own, each of `others`. Returns the answers of the frames
/// up to the first that failed, and its error.
///
/// The threads take the frames [`FRAMES_PER_TAKE`] at a time, in order, each taking the next
/// frames not yet taken when it is done with its last, so a thread whose frames are cheap does
/// not wait for one whose frames are dear (frames of a bake differ in cost several times over:
/// where a limit binds, a solve restarts its pull). Which thread solves a frame changes nothing
/// in its answer: a frame's solve is a function of the frame alone.
fn solve_apart(
    solver: &mut dyn Solver,
    others: &mut [Box<dyn Solver>],
    frame: &FrameSetter<'_, '_>,
    start: &Pose,
    frames: Range<usize>,
) -> (Vec<Solution>, Option<Error>) {
    let next = AtomicUsize::new(frames.start);
    // The first frame that failed (`usize::MAX`: none yet): no thread takes frames after it.
    let first_failed = AtomicUsize::new(usize::MAX);
    let run = |solver: &mut dyn Solver| -> ThreadFrames {
        let mut frame = frame.clone();
        let mut solved = Vec::new();
        loop {
            let take = next.fetch_add(FRAMES_PER_TAKE, Ordering::Relaxed);
            if take >= frames.end || take > first_failed.load(Ordering::Relaxed) {
                return (solved, None);
            }
            for f in take..(take + FRAMES_PER_TAKE).min(frames.end) {
                let roots = frame.inputs.root_translations.map(|t| t[f]);
                match frame.set(f).and_then(|()| solve_frame(solver, &frame, start, roots)) {
                    Ok(sol) => solved.push((f, sol)),
                    Err(e) => {
                        first_failed.fetch_min(f, Ordering::Relaxed);
                        return (solved, Some((f, e)));
                    }
                }
            }
        }
    };
    let parts: Vec<ThreadFrames> = if others.is_empty() {
        vec![run(solver)]
    } else {
        std::thread::scope(|scope| {
            // (A thread the system refuses to start is done without: the others share its frames.)
            let handles: Vec<_> = others.iter_mut().filter_map(|s| std::thread::Builder::new().spawn_scoped(scope, || run(s.as_mut())).ok()).collect();
            let mut parts = vec![run(solver)];
            // (A panic in a thread is raised again here, in the caller's thread, where the C and
            // Python boundaries catch it.)
            parts.extend(handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))));
            parts
        })
    };
    // Every frame before the first that failed was taken (frames are taken in order) and solved
    // (a thread stops only at a frame of its own that failed).
    let mut failed: Option<(usize, Error)> = None;
    let mut slots: Vec<Option<Solution>> = (0..frames.len()).map(|_| None).collect();
    for (part, error) in parts {
        for (f, sol) in part {
            slots[f - frames.start] = Some(sol);
        }
        if let Some((f, e)) = error
            && failed.as_ref().is_none_or(|(g, _)| f < *g)
        {
            failed = Some((f, e));
        }
    }
    let solved = slots.into_iter().map_while(|s| s).collect();
    (solved, failed.map(|(_, e)| e))
}

/// The most threads [`solve_sequence`] uses: [`std::thread::available_parallelism`] (the cores
/// the process may run on), capped by the `SINEW_THREADS` environment variable where it is a
/// positive integer (a host that keeps its cores for itself sets it, 1 for none but the
/// caller's). A larger value is no more than the cores: it used to start that many threads
/// (10 000 asked for 500 on a 4000-frame range, and a block of 256 frames a thread held 80 000
/// frames' answers at once).
fn thread_cap() -> usize {
    let machine = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    threads_allowed(std::env::var("SINEW_THREADS").ok().as_deref(), machine)
}

/// [`thread_cap`] given the variable's value and the cores.
fn threads_allowed(variable: Option<&str>, cores: usize) -> usize {
    variable.and_then(|v| v.trim().parse::<usize>().ok()).filter(|&n| n > 0).map_or(cores, |n| n.min(cores))
}

/// Sets a sequence's frame on its problem.
#[derive(Clone)]
struct FrameSetter<'a, 'b> {
    /// The problem, with the frame last set.
    problem: Problem,
    /// Its reference as the frame last set has it.
    reference: Pose,
    inputs: FrameTargets<'a>,
    /// The rig's root bones, in bone order.
    roots: &'b [usize],
}

impl FrameSetter<'_, '_> {
    /// Frame `f`'s targets, orientations, poles, root rests and reference (its rotations and
    /// root translation, where the inputs have them) on `self.problem`.
    fn set(&mut self, f: usize) -> Result<()> {
        let (problem, inputs) = (&mut self.problem, &self.inputs);
        let g = problem.goals().len();
        for gi in 0..g {
            let k = f * g + gi;
            problem.set_target(gi, inputs.targets[k])?;
            if let Some(o) = inputs.orientations
                && problem.goals()[gi].orientation.is_some()
            {
                problem.set_orientation(gi, Some(o[k]))?;
            }
            if let Some(p) = inputs.poles
                && problem.goals()[gi].pole.is_some()
            {
                problem.set_pole_target(gi, p[k])?;
            }
        }
        let n = problem.rig().len();
        if let Some(r) = inputs.references {
            self.reference.rotations.copy_from_slice(&r[f * n..(f + 1) * n]);
        }
        if let Some(t) = inputs.root_translations {
            self.reference.root_translation = t[f];
        }
        if let Some(m) = inputs.root_rests {
            for (r, &b) in self.roots.iter().enumerate() {
                problem.set_root_rest(b, &m[f * self.roots.len() + r])?;
            }
        }
        // (A problem without a reference gets one only from per-frame references.)
        if inputs.references.is_some() || (inputs.root_translations.is_some() && problem.has_reference()) {
            problem.set_reference(Reference::Pose(self.reference.clone()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::goal::Goal;
    use crate::limits::JointLimit;
    use crate::rig::{Bone, Rig};
    use crate::solver::SolveSettings;

    /// FABRIK, failing at the frames whose target's x is one of `at` thousandths.
    #[derive(Debug)]
    struct FailsAt {
        inner: Box<dyn Solver>,
        at: Vec<usize>,
    }

    impl Solver for FailsAt {
        fn name(&self) -> &'static str {
            "fails_at"
        }
        fn settings(&self) -> &SolveSettings {
            self.inner.settings()
        }
        fn solve(&mut self, problem: &Problem, start: &Pose) -> Result<Solution> {
            let frame = (problem.goals()[0].target.x * 1e3).round() as usize;
            if self.at.contains(&frame) {
                return Err(Error::Format(format!("frame {frame}")));
            }
            self.inner.solve(problem, start)
        }
    }

    fn chain_problem() -> Problem {
        let bones = (0..3usize)
            .map(|i| Bone {
                name: format!("b{i}"),
                parent: i.checked_sub(1),
                rest_head: if i == 0 { DVec3::ZERO } else { DVec3::Y },
                rest_rotation: DQuat::IDENTITY,
                length: 1.0,
                limit: JointLimit::default(),
            })
            .collect();
        let mut problem = Problem::new(Rig::new(bones).unwrap(), vec![Goal::new(2, DVec3::new(0.0, 2.0, 1.0))], RootMode::Pinned).unwrap();
        problem.set_reference(Reference::Pose(Pose::rest(3))).unwrap();
        problem
    }

    /// `SINEW_THREADS` caps the threads at the cores; what is not a positive integer is ignored.
    #[test]
    fn sinew_threads_caps_the_threads_at_the_cores() {
        for (variable, cores, threads) in
            [(None, 4, 4), (Some("1"), 4, 1), (Some(" 3 "), 4, 3), (Some("7"), 2, 2), (Some("10000"), 2, 2), (Some("0"), 2, 2), (Some("-1"), 2, 2), (Some("abc"), 2, 2), (Some(""), 2, 2)]
        {
            assert_eq!(threads_allowed(variable, cores), threads, "SINEW_THREADS={variable:?} on {cores} cores");
        }
    }

    /// A per-frame reference too large to normalise is refused before any frame is solved, naming
    /// the frame (it used to be refused by the frame's solve, after the frames before it were
    /// handed to the sink).
    #[test]
    fn a_huge_reference_rotation_is_refused_before_any_frame() {
        let problem = chain_problem();
        let frames = 40;
        let targets = vec![DVec3::new(0.0, 2.0, 1.0); frames];
        let mut references = vec![DQuat::IDENTITY; frames * 3];
        references[35 * 3 + 1] = DQuat::from_xyzw(0.0, 0.0, 1e200, 1e200);
        let inputs = FrameTargets { targets: &targets, orientations: None, poles: None, references: Some(&references), root_translations: None, root_rests: None };
        let mut solver = Method::Fabrik.solver(SolveSettings::default()).unwrap();
        let mut sunk = 0;
        let result = solve_sequence(solver.as_mut(), &problem, &Pose::rest(3), frames, inputs, |_, _| sunk += 1);
        match result {
            Err(Error::TooLarge { what, .. }) => assert!(what.contains("frame 35") && what.contains("b1"), "{what}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(sunk, 0);
    }

    /// The frames of a range solved by three threads, each taking the next frames not yet taken,
    /// come back in order, each the single solve of its frame; where some fail, the frames before
    /// the first that failed come back, and that frame's error.
    #[test]
    fn frames_solved_apart_come_back_in_order_up_to_the_first_that_failed() {
        let problem = chain_problem();
        let frames = 100;
        let targets: Vec<DVec3> = (0..frames).map(|f| DVec3::new(f as f64 * 1e-3, 2.0, 1.0)).collect();
        let roots = [0];
        let inputs = FrameTargets { targets: &targets, orientations: None, poles: None, references: None, root_translations: None, root_rests: None };
        let setter = FrameSetter { reference: problem.reference().pose().unwrap().clone(), problem: problem.clone(), inputs, roots: &roots };
        let start = Pose::rest(3);
        let fabrik = || Method::Fabrik.solver(SolveSettings::default()).unwrap();
        let mut single = fabrik();
        let singles: Vec<Solution> = (0..frames)
            .map(|f| {
                let mut p = problem.clone();
                p.set_target(0, targets[f]).unwrap();
                single.solve(&p, &start).unwrap()
            })
            .collect();
        for at in [vec![], vec![37], vec![80, 37], vec![0], vec![99], vec![1, 2, 3, 50]] {
            let failing = |at: &Vec<usize>| FailsAt { inner: fabrik(), at: at.clone() };
            let mut solver = failing(&at);
            let mut others: Vec<Box<dyn Solver>> = (0..2).map(|_| Box::new(failing(&at)) as Box<dyn Solver>).collect();
            let (solved, failed) = solve_apart(&mut solver, &mut others, &setter, &start, 0..frames);
            let first = at.iter().copied().min();
            assert_eq!(solved.len(), first.unwrap_or(frames), "failing at {at:?}");
            match (first, failed) {
                (Some(f), Some(Error::Format(what))) => assert_eq!(what, format!("frame {f}")),
                (None, None) => {}
                (_, failed) => panic!("failing at {at:?}: {failed:?}"),
            }
            for (f, sol) in solved.iter().enumerate() {
                assert!(sol.pose.rotations.iter().zip(&singles[f].pose.rotations).all(|(a, b)| a.to_array() == b.to_array()), "frame {f} is its single solve");
            }
        }
    }

    /// A sink that says stop gets no frame after the one it stopped at, and the call says it was
    /// stopped; with a reference (frames solved side by side, in blocks longer than the range
    /// here) and without one (one frame after another), at the first, a middle and the last frame.
    #[test]
    fn a_sink_that_says_stop_gets_no_later_frame() {
        let frames = 50;
        let targets: Vec<DVec3> = (0..frames).map(|f| DVec3::new(f as f64 * 1e-3, 2.0, 1.0)).collect();
        let inputs = FrameTargets { targets: &targets, orientations: None, poles: None, references: None, root_translations: None, root_rests: None };
        for with_reference in [true, false] {
            let mut problem = chain_problem();
            if !with_reference {
                problem.set_reference(Reference::LeastMotion).unwrap();
            }
            for stop_at in [0, 17, frames - 1, frames] {
                let mut solver = Method::Fabrik.solver(SolveSettings::default()).unwrap();
                let mut seen = vec![];
                let flow = solve_sequence_until(solver.as_mut(), &problem, &Pose::rest(3), frames, inputs, |f, _| {
                    seen.push(f);
                    if f == stop_at { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
                })
                .unwrap();
                let expected: Vec<usize> = (0..frames.min(stop_at + 1)).collect();
                assert_eq!(seen, expected, "reference {with_reference}, stop at {stop_at}");
                assert_eq!(flow.is_break(), stop_at < frames, "reference {with_reference}, stop at {stop_at}");
            }
        }
    }
}
