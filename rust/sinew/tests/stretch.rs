//! Bones that stretch (`JointLimit::stretch`, Blender's `ik_stretch`): a stretchy bone's length is
//! an unknown of the solve, returned as a length scale per bone (`Pose::scales`).
//!
//! Most tests measure `fabrik` and `dls`, the methods that return the pose nearest the reference
//! (Blender's behaviour); `the_other_methods_and_stretch` covers the rest: the Jacobian family
//! has the length unknown too, the geometric paper methods refuse stretch.

mod common;

use common::{Rng, check_solution};
use glam::{DQuat, DVec3};
use sinew::{
    Bone, Error, FrameTargets, Goal, JointLimit, Method, Pose, Problem, Reference, Rig, RootMode,
    SolveSettings, Solution, solve_sequence,
};

/// Blender's two-bone test chain (tests/blender's and the measurements below): the root at the
/// origin, the elbow at (0, `bent`, 0.5) in armature space (Y forward, Z up), the tip at
/// (0, 0, 1); `stretch` per bone.
fn two_bones(bent: f64, stretch: [f64; 2]) -> Rig {
    let elbow = DVec3::new(0.0, bent, 0.5);
    let tip = DVec3::new(0.0, 0.0, 1.0);
    let r0 = sinew::rig::rotation_from_head_tail(DVec3::ZERO, elbow, 0.0);
    let r1 = sinew::rig::rotation_from_head_tail(elbow, tip, 0.0);
    Rig::new(vec![
        bone("b0", None, DVec3::ZERO, r0, elbow.length(), stretch[0]),
        bone("b1", Some(0), DVec3::new(0.0, elbow.length(), 0.0), r0.conjugate() * r1, (tip - elbow).length(), stretch[1]),
    ])
    .unwrap()
}

fn bone(name: &str, parent: Option<usize>, head: DVec3, rot: DQuat, length: f64, stretch: f64) -> Bone {
    Bone { name: name.into(), parent, rest_head: head, rest_rotation: rot, length, limit: JointLimit { stretch, ..JointLimit::FREE } }
}

/// A five-bone chain up +Y: a rigid root, then bones with the given stretches; the third bone's
/// child sits off its tail (an offset head, which its scale carries).
fn chain5(stretch: [f64; 4]) -> Rig {
    let mut bones = vec![bone("root", None, DVec3::ZERO, DQuat::IDENTITY, 0.3, 0.0)];
    let heads = [DVec3::new(0.0, 0.3, 0.0), DVec3::new(0.0, 0.5, 0.0), DVec3::new(0.05, 0.45, 0.02), DVec3::new(0.0, 0.4, 0.0)];
    let rots = [DQuat::from_rotation_x(0.2), DQuat::from_rotation_z(-0.3), DQuat::from_rotation_x(0.4), DQuat::from_rotation_z(0.25)];
    let lengths = [0.5, 0.45, 0.4, 0.3];
    for k in 0..4 {
        bones.push(bone(&format!("b{k}"), Some(k), heads[k], rots[k], lengths[k], stretch[k]));
    }
    Rig::new(bones).unwrap()
}

/// The methods whose answer is the pose nearest the reference (or, without one, FABRIK's and
/// DLS's own least motion), which the measurements against Blender below hold to.
const BLENDER_LIKE: [Method; 2] = [Method::Fabrik, Method::Dls];

fn settings() -> SolveSettings {
    SolveSettings { max_iterations: 200, ..SolveSettings::default() }
}

fn solve(problem: &Problem, method: Method, start: &Pose) -> Solution {
    method.solver(settings()).unwrap().solve(problem, start).unwrap()
}

/// `problem` with `reference` as its reference pose, or none (least motion) for `None`.
fn with_reference(mut problem: Problem, reference: Option<&Pose>) -> Problem {
    problem.set_reference(reference.map_or(Reference::LeastMotion, |r| Reference::Pose(r.clone()))).unwrap();
    problem
}

/// Where every bone is rigid (stretch 0, the default), nothing changes: no length scales come
/// back, and a bone that may stretch but that no goal moves changes no bit of the solution.
#[test]
fn rigid_rigs_are_unchanged() {
    let target = DVec3::new(0.4, 1.2, 0.3);
    for method in BLENDER_LIKE {
        for reference in [None, Some(Pose::rest(5))] {
            let rigid = with_reference(Problem::new(chain5([0.0; 4]), vec![Goal::new(4, target).with_chain_length(3)], RootMode::Pinned).unwrap(), reference.as_ref());
            assert!(!rigid.stretches());
            let a = solve(&rigid, method, &Pose::rest(5));
            assert!(a.reached && a.pose.scales.is_empty(), "{method:?}: {a:?}");
            check_solution(&rigid, &Pose::rest(5), &a, 1e-4, 1e-9).unwrap();
            // b0 may stretch, but the goal moves only b1..b3.
            let unmoved = with_reference(Problem::new(chain5([0.5, 0.0, 0.0, 0.0]), vec![Goal::new(4, target).with_chain_length(3)], RootMode::Pinned).unwrap(), reference.as_ref());
            assert!(!unmoved.stretches());
            let b = solve(&unmoved, method, &Pose::rest(5));
            assert_eq!(a, b, "{method:?}");
            // Out of reach, a rigid chain straightens toward the target and keeps its lengths.
            let far = with_reference(Problem::new(chain5([0.0; 4]), vec![Goal::new(4, DVec3::new(0.0, 9.0, 0.0))], RootMode::Pinned).unwrap(), reference.as_ref());
            let c = solve(&far, method, &Pose::rest(5));
            assert!(!c.reached && c.pose.scales.is_empty());
            check_solution(&far, &Pose::rest(5), &c, 1e-4, 1e-9).unwrap();
        }
    }
}

/// A chain whose bones may stretch reaches targets beyond its rigid reach, every method, with and
/// without a reference pose: each stretchy bone's length is its rest length times its scale
/// (forward kinematics checked independently, offsets scaled with their parent), rigid bones
/// keep scale 1 exactly, and the chain is (nearly) straight, longer than at rest.
#[test]
fn a_stretchy_chain_reaches_targets_out_of_reach() {
    let mut rng = Rng::new(15);
    let rig = chain5([0.1, 0.0, 0.3, 1.0]);
    let base = rig.rest_frames().heads[1];
    let reach = rig.reach(4, 1);
    for case in 0..40 {
        let target = base + rng.unit() * reach * rng.range(1.05, 2.5);
        for method in BLENDER_LIKE {
            for reference in [None, Some(Pose::rest(5))] {
                let problem = with_reference(Problem::new(rig.clone(), vec![Goal::new(4, target).with_chain_length(4)], RootMode::Pinned).unwrap(), reference.as_ref());
                assert!(problem.stretches());
                let sol = solve(&problem, method, &Pose::rest(5));
                let what = format!("case {case} {method:?} reference {}: {:?} {:?}", reference.is_some(), sol.stop, sol.residuals);
                assert!(sol.reached, "{what}");
                check_solution(&problem, &Pose::rest(5), &sol, 1e-4, 1e-9).map_err(|e| format!("{what}: {e}")).unwrap();
                let s = &sol.pose.scales;
                assert_eq!(s.len(), 5);
                assert!(s[0] == 1.0 && s[2] == 1.0, "{what}: {s:?}");
                assert!(s[4] > 1.0, "{what}: {s:?}");
                if reference.is_some() || method == Method::Fabrik {
                    // The bone whose stretch weighs least (Blender's weight: ik_stretch², to the
                    // 3/2) stretches most. (The others may even shorten a little: the pose nearest
                    // the reference, or DLS's least motion from the start, trades that against
                    // turning.)
                    assert!(s[4] > s[3] && s[4] > s[1], "{what}: {s:?}");
                }
            }
        }
    }
}

/// Within reach a bone stretches little (prefer reaching without stretch): without a reference
/// FABRIK reaches with rigid bones and stretches nothing; toward a reference the pose nearest it
/// stretches a bone only as far as its weight makes that nearer than turning, under 1% at
/// Rigify's `ik_stretch` 0.1 on these targets.
#[test]
fn within_reach_a_chain_barely_stretches() {
    let mut rng = Rng::new(3);
    let rig = two_bones(0.25, [0.1, 0.1]);
    let reach = rig.reach(1, 0);
    for case in 0..50 {
        let target = rng.in_ball(0.9 * reach) + DVec3::new(0.0, 0.0, 0.0);
        if target.length() < 0.35 * reach {
            continue;
        }
        let plain = with_reference(Problem::new(rig.clone(), vec![Goal::new(1, target)], RootMode::Pinned).unwrap(), None);
        let sol = solve(&plain, Method::Fabrik, &Pose::rest(2));
        assert!(sol.reached, "case {case}");
        assert_eq!(sol.pose.scales, vec![1.0, 1.0], "case {case}");
        let toward = with_reference(plain, Some(&Pose::rest(2)));
        for method in BLENDER_LIKE {
            let sol = solve(&toward, method, &Pose::rest(2));
            assert!(sol.reached, "case {case} {method:?}");
            check_solution(&toward, &Pose::rest(2), &sol, 1e-4, 1e-9).unwrap();
            assert!(sol.pose.scales.iter().all(|s| (s - 1.0).abs() < 0.01), "case {case} {method:?}: {:?}", sol.pose.scales);
        }
    }
}

/// Blender 5.0 shares a stretch between bones as its weights say: a straight two-bone chain with
/// `ik_stretch` 0.5 and 0.1 pulled along its line half its length past reach stretches the first
/// bone 0.99204 and the second 0.00794 of their lengths (measured; 125 to 1, `(0.25 / 0.01)^{3/2}`).
#[test]
fn stretch_is_shared_as_blenders_weights_share_it() {
    let problem = with_reference(Problem::new(two_bones(0.0, [0.5, 0.1]), vec![Goal::new(1, DVec3::new(0.0, 0.0, 1.5))], RootMode::Pinned).unwrap(), Some(&Pose::rest(2)));
    for method in BLENDER_LIKE {
        let sol = solve(&problem, method, &Pose::rest(2));
        assert!(sol.reached, "{method:?}");
        let s = &sol.pose.scales;
        assert!((s[0] - 1.99204).abs() < 2e-3 && (s[1] - 1.00794).abs() < 2e-3, "{method:?}: {s:?}");
    }
}

/// Blender 5.0's IK on the two-bone chain bent 0.25 (the elbow 27° off the line) with
/// `ik_stretch` 0.1 on both bones (Rigify's), read from its evaluated pose: (target, the two
/// bones' scales, the elbow). Sinew's solve toward the pose before IK lands within 3 cm of the
/// elbow (2 cm at most on these) and 0.5% of each scale; out of reach Blender straightens the
/// chain fully where Sinew leaves a bend of a few degrees.
#[test]
fn agrees_with_blenders_ik_on_a_two_bone_chain() {
    let measured: [([f64; 3], [f64; 2], [f64; 3]); 4] = [
        ([0.0, 0.0, 1.5], [1.34095, 1.34189], [0.0, 0.0, 0.7496]),
        ([0.0, 0.3, 1.2], [1.10599, 1.10625], [0.0, 0.15, 0.5998]),
        ([0.0, 0.2, 0.8], [0.99451, 0.99309], [0.0, 0.4614, 0.3102]),
        ([0.0, 0.4, 0.6], [0.99343, 0.99018], [0.0, 0.5512, 0.0675]),
    ];
    for (target, scales, elbow) in measured {
        // Blender's armature space (X right, Y back, Z up) is this rig's space.
        let problem = with_reference(
            Problem::new(two_bones(0.25, [0.1, 0.1]), vec![Goal::new(1, DVec3::from_array(target))], RootMode::Pinned).unwrap(),
            Some(&Pose::rest(2)),
        );
        let sol = solve(&problem, Method::Fabrik, &Pose::rest(2));
        assert!(sol.reached);
        let f = problem.rig().forward(&sol.pose);
        let d = (f.tails[0] - DVec3::from_array(elbow)).length();
        assert!(d < 0.03, "{target:?}: elbow {} vs Blender's {elbow:?}", f.tails[0]);
        for k in 0..2 {
            assert!((sol.pose.scales[k] - scales[k]).abs() < 5e-3, "{target:?}: scales {:?} vs Blender's {scales:?}", sol.pose.scales);
        }
    }
}

/// The answer is a continuous function of the target, beyond reach and across the edge of reach:
/// a target moved by 1e-4 moves each scale by O(1e-4) and turns each bone by O(1e-4) rad
/// (solved cold each time, toward the rest pose, as a bake solves each frame).
#[test]
fn stretch_is_continuous_in_the_target() {
    let rig = chain5([0.1, 0.2, 0.1, 0.3]);
    let reach = rig.reach(4, 1);
    let base = rig.rest_frames().heads[1];
    let dir = DVec3::new(0.3, 1.0, 0.2).normalize();
    for method in BLENDER_LIKE {
        let mut last: Option<Pose> = None;
        let step = 1e-3 * reach;
        let mut k = 0.9;
        while k < 1.2 {
            let target = base + dir * reach * k;
            let problem = with_reference(Problem::new(rig.clone(), vec![Goal::new(4, target).with_chain_length(4)], RootMode::Pinned).unwrap(), Some(&Pose::rest(5)));
            let sol = solve(&problem, method, &Pose::rest(5));
            assert!(sol.reached, "{method:?} at {k}");
            if let Some(prev) = &last {
                let turn = sol.pose.max_angle_to(prev);
                let ds = sol.pose.scales.iter().zip(&prev.scales).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
                assert!(turn < 0.05 && ds < 0.02, "{method:?} at {k}: turned {turn}, scales changed {ds}");
            }
            last = Some(sol.pose);
            k += step / reach;
        }
    }
}

/// A sequence of frames carries each frame's stretch into the next as its warm start: a target
/// moving smoothly out of reach and back is followed without pops, every frame reached: no frame
/// turns a bone much further (30%) than the rigid chain's largest turn following the same targets held
/// within its reach (near full extension a chain's bend changes fast with its target's
/// distance), and no scale jumps.
#[test]
fn a_sequence_stretches_and_comes_back() {
    let frames = 120;
    let targets = |rig: &Rig, clip: bool| -> Vec<DVec3> {
        let reach = rig.reach(4, 1);
        let base = rig.rest_frames().heads[1];
        (0..frames)
            .map(|f| {
                let t = f as f64 / frames as f64 * std::f64::consts::TAU;
                let k = 1.0 + 0.3 * t.sin();
                base + DVec3::new(0.3 * t.sin(), 1.0, 0.2 * t.cos()).normalize() * reach * if clip { k.min(0.999) } else { k }
            })
            .collect()
    };
    let run = |rig: Rig, method: Method, reference: Option<&Pose>, clip: bool| -> Vec<Pose> {
        let targets = targets(&rig, clip);
        let problem = with_reference(Problem::new(rig, vec![Goal::new(4, targets[0]).with_chain_length(4)], RootMode::Pinned).unwrap(), reference);
        let mut solver = method.solver(settings()).unwrap();
        let mut poses = Vec::new();
        let inputs = FrameTargets { targets: &targets, orientations: None, poles: None, references: None, root_translations: None, root_rests: None };
        solve_sequence(solver.as_mut(), &problem, &Pose::rest(5), frames, inputs, |f, s| {
            assert!(s.reached, "{method:?} frame {f}: {:?}", s.residuals);
            poses.push(s.pose.clone());
        })
        .unwrap();
        poses
    };
    // (Without a reference the first frame is solved from the rest pose, the others from the
    // frame before: where the chain is straight, twist about it is free and the two may differ by
    // it.)
    let largest_turn = |poses: &[Pose], skip: usize| poses.windows(2).skip(skip).map(|w| w[0].max_angle_to(&w[1])).fold(0.0, f64::max);
    for method in BLENDER_LIKE {
        for reference in [None, Some(Pose::rest(5))] {
            let skip = usize::from(reference.is_none());
            let rigid = largest_turn(&run(chain5([0.0; 4]), method, reference.as_ref(), true), skip);
            let poses = run(chain5([0.1; 4]), method, reference.as_ref(), false);
            let most = poses.iter().map(|p| p.scales[4]).fold(0.0, f64::max);
            let least = poses.iter().map(|p| p.scales[4]).fold(f64::INFINITY, f64::min);
            // (DLS alone takes the least motion from the frame before: once stretched, a chain
            // comes back within reach by bending, as it would keep any turn.)
            let back = reference.is_some() || method == Method::Fabrik;
            assert!(most > 1.05 && (least < 1.01 || !back), "{method:?} reference {}: scales of the last bone from {least} to {most}", reference.is_some());
            let turn = largest_turn(&poses, skip);
            let ds = poses.windows(2).flat_map(|w| w[0].scales.iter().zip(&w[1].scales).map(|(a, b)| (a - b).abs())).fold(0.0, f64::max);
            assert!(turn <= 1.3 * rigid + 0.02 && ds < 0.05, "{method:?} reference {}: turned {turn} rad in a frame (rigid: {rigid}), a scale changed {ds}", reference.is_some());
        }
    }
}

/// Bad stretches and length scales are typed errors naming the bone; nothing panics.
#[test]
fn bad_stretch_and_scales_are_typed_errors() {
    for bad in [-0.1, 1.5, f64::NAN, f64::INFINITY] {
        let mut rig = two_bones(0.1, [0.0, 0.0]);
        let e = rig.set_limit(1, JointLimit { stretch: bad, ..JointLimit::FREE }).unwrap_err();
        assert!(matches!(&e, Error::LimitOutOfRange { bone, what, .. } if bone == "b1" && what == "stretch"), "{e}");
    }
    let problem = Problem::new(two_bones(0.1, [0.0, 0.2]), vec![Goal::new(1, DVec3::new(0.0, 0.0, 1.5))], RootMode::Pinned).unwrap();
    let pose = |scales: Vec<f64>| Pose { scales, ..Pose::rest(2) };
    for method in BLENDER_LIKE {
        let mut solver = method.solver(settings()).unwrap();
        let e = solver.solve(&problem, &pose(vec![1.0])).unwrap_err();
        assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
        let e = solver.solve(&problem, &pose(vec![1.0, f64::NAN])).unwrap_err();
        assert!(matches!(&e, Error::NonFinite { what } if what.contains("\"b1\"")), "{e}");
        // A rigid bone keeps scale 1; a stretchy one stays within the bounds.
        let e = solver.solve(&problem, &pose(vec![1.2, 1.0])).unwrap_err();
        assert!(matches!(&e, Error::LimitOutOfRange { bone, .. } if bone == "b0"), "{e}");
        for s in [0.0, -1.0, 1e4] {
            let e = solver.solve(&problem, &pose(vec![1.0, s])).unwrap_err();
            assert!(matches!(&e, Error::LimitOutOfRange { bone, .. } if bone == "b1"), "{e}");
        }
        // A start that stretches is a warm start.
        let sol = solver.solve(&problem, &pose(vec![1.0, 1.8])).unwrap();
        assert!(sol.reached);
    }
    let mut p = problem.clone();
    assert!(p.set_reference(Reference::Pose(pose(vec![1.0, 2.0, 1.0]).clone())).is_err());
}

/// The problem format: `"stretch"` per bone (0 when absent), validated, written back; a start or
/// reference pose may carry `"scales"`, and a solution file carries them when a bone stretched.
#[test]
fn the_problem_format_carries_stretch() {
    let text = |stretch: &str| {
        format!(
            r#"{{"format": "sinew.problem/1",
            "bones": [{{"name": "a", "head": [0,0,0], "tail": [0,0,1]}},
                      {{"name": "b", "parent": "a", "head": [0,0,1], "tail": [0,0,2]{stretch}}}],
            "goals": [{{"bone": "b", "target": [0, 0, 3]}}]}}"#
        )
    };
    let lp = Problem::from_json(&text(", \"stretch\": 0.5")).unwrap();
    assert_eq!(lp.problem.rig().bone(1).limit.stretch, 0.5);
    assert_eq!(lp.problem.rig().bone(0).limit.stretch, 0.0);
    let sol = lp.method.solver(lp.settings).unwrap().solve(&lp.problem, &lp.pose).unwrap();
    assert!(sol.reached);
    let file = sinew::SolutionFile::new(lp.problem.rig(), lp.method, &sol);
    assert_eq!(file.scales.len(), 2);
    assert!((file.scales[1] - 2.0).abs() < 1e-3, "{:?}", file.scales);
    let rigid = Problem::from_json(&text("")).unwrap();
    let sol = rigid.method.solver(rigid.settings).unwrap().solve(&rigid.problem, &rigid.pose).unwrap();
    let json = serde_json::to_value(sinew::SolutionFile::new(rigid.problem.rig(), rigid.method, &sol)).unwrap();
    assert!(json.get("scales").is_none(), "no scales for a rigid solve: {json}");
    for bad in [", \"stretch\": 2", ", \"stretch\": -0.5"] {
        assert!(matches!(Problem::from_json(&text(bad)), Err(Error::LimitOutOfRange { .. })));
    }
    // Written back, read the same.
    let file = sinew::ProblemFile::from_json(&text(", \"stretch\": 0.25")).unwrap();
    assert_eq!(sinew::ProblemFile::from_json(&file.to_json()).unwrap(), file);
    // A start pose with scales.
    let with_pose = text(", \"stretch\": 0.5").replace("\"goals\"", "\"pose\": {\"rotations\": [[1,0,0,0],[1,0,0,0]], \"scales\": [1, 1.5]}, \"goals\"");
    let lp = Problem::from_json(&with_pose).unwrap();
    assert_eq!(lp.pose.scales, vec![1.0, 1.5]);
    let bad = text(", \"stretch\": 0.5").replace("\"goals\"", "\"pose\": {\"rotations\": [[1,0,0,0],[1,0,0,0]], \"scales\": [1.5, 1]}, \"goals\"");
    assert!(matches!(Problem::from_json(&bad), Err(Error::LimitOutOfRange { .. })));
}

/// The methods added beside `fabrik` and `dls`: the Jacobian family (transpose, pseudo-inverse,
/// SVD-DLS, SDLS) has a column per stretchy bone's length and stretches a chain toward targets
/// beyond its reach; textbook FABRIK, CCD and triangulation, whose steps keep every length,
/// refuse a problem where a stretchy bone carries a goal (`Error::Unsupported`), and a stretchy
/// bone no goal moves changes no bit of their solutions.
#[test]
fn the_other_methods_and_stretch() {
    let mut rng = Rng::new(21);
    let rig = chain5([0.1, 0.0, 0.3, 1.0]);
    let base = rig.rest_frames().heads[1];
    let reach = rig.reach(4, 1);
    let many = SolveSettings { max_iterations: 2000, ..settings() };
    for case in 0..20 {
        let target = base + rng.unit() * reach * rng.range(1.05, 1.6);
        let problem = Problem::new(rig.clone(), vec![Goal::new(4, target).with_chain_length(4)], RootMode::Pinned).unwrap();
        for method in [Method::JacobianTranspose, Method::JacobianPinv, Method::SvdDls, Method::Sdls] {
            let sol = method.solver(many).unwrap().solve(&problem, &Pose::rest(5)).unwrap();
            let what = format!("case {case} {method:?}: {:?} {:?} {:?}", sol.stop, sol.residuals, sol.pose.scales);
            check_solution(&problem, &Pose::rest(5), &sol, 1e-4, 1e-9).map_err(|e| format!("{what}: {e}")).unwrap();
            let s = &sol.pose.scales;
            assert!(s.len() == 5 && s[0] == 1.0 && s[2] == 1.0 && s[4] > 1.0, "{what}");
            if matches!(method, Method::SvdDls | Method::Sdls) {
                assert!(sol.reached, "{what}");
            }
        }
        for method in [Method::FabrikClassic, Method::Ccd, Method::Triangulation] {
            let e = method.solver(settings()).unwrap().solve(&problem, &Pose::rest(5)).unwrap_err();
            assert!(matches!(&e, Error::Unsupported { what, .. } if what.contains("\"b0\"") && what.contains("stretch")), "{e}");
        }
    }
    let target = DVec3::new(0.4, 1.2, 0.3);
    for method in [Method::FabrikClassic, Method::Ccd, Method::Triangulation] {
        let rigid = Problem::new(chain5([0.0; 4]), vec![Goal::new(4, target).with_chain_length(3)], RootMode::Pinned).unwrap();
        let unmoved = Problem::new(chain5([0.5, 0.0, 0.0, 0.0]), vec![Goal::new(4, target).with_chain_length(3)], RootMode::Pinned).unwrap();
        let a = solve(&rigid, method, &Pose::rest(5));
        let b = solve(&unmoved, method, &Pose::rest(5));
        assert_eq!(a, b, "{method:?}");
        // A start that stretches the unmoved bone keeps it.
        let start = Pose { scales: vec![1.0, 1.5, 1.0, 1.0, 1.0], ..Pose::rest(5) };
        let c = solve(&unmoved, method, &start);
        assert_eq!(c.pose.scales, start.scales, "{method:?}");
        check_solution(&unmoved, &start, &c, 1e-4, 1e-9).unwrap();
    }
}

/// A stretch set on a problem after it was made (`Problem::set_limit`, as the C and Python
/// adapters do) re-derives everything the steps read, the coupled goals' groups included.
#[test]
fn a_stretch_set_on_a_problem_is_solved() {
    let target = DVec3::new(0.0, 0.0, 1.5);
    for method in BLENDER_LIKE.into_iter().chain([Method::SvdDls]) {
        let mut problem = Problem::new(two_bones(0.1, [0.0, 0.0]), vec![Goal::new(1, target)], RootMode::Pinned).unwrap();
        problem.set_limit(1, JointLimit { stretch: 0.5, ..JointLimit::FREE }).unwrap();
        assert!(problem.stretches());
        let sol = solve(&problem, method, &Pose::rest(2));
        assert!(sol.reached && sol.pose.scales[1] > 1.5, "{method:?}: {:?} {:?}", sol.residuals, sol.pose.scales);
        check_solution(&problem, &Pose::rest(2), &sol, 1e-4, 1e-9).unwrap();
    }
}
