use glam::DQuat;

use super::*;
use crate::geometry::angle_between;
use crate::problem::Reference;
use crate::goal::Goal;
use crate::limits::{HingeLimit, JointLimit, Swing};
use crate::rig::{Bone, Rig};

/// A bent five-bone chain (lengths 1..5) and a target 1% of its reach off its end.
fn bent_chain() -> (Vec<DVec3>, Vec<f64>, DVec3) {
    let dirs = [DVec3::Y, DVec3::new(0.3, 1.0, 0.1), DVec3::new(0.8, 0.5, -0.2), DVec3::new(1.0, -0.2, 0.3), DVec3::new(0.4, -0.9, 0.5)];
    let lengths: Vec<f64> = (1..=5).map(f64::from).collect();
    let mut p = vec![DVec3::ZERO];
    for (d, l) in dirs.iter().zip(&lengths) {
        p.push(*p.last().unwrap() + d.normalize() * *l);
    }
    let target = p[5] + DVec3::new(0.05, 0.1, -0.08);
    (p, lengths, target)
}

#[test]
fn chain_position_steps_keep_lengths_and_converge_quadratically() {
    let (mut p, lengths, target) = bent_chain();
    let top = p[0];
    let mut gaps = vec![(p[5] - target).length()];
    for _ in 0..3 {
        assert!(chain_position_step(&mut p, target));
        gaps.push((p[5] - target).length());
        assert_eq!(p[0], top, "the top is pinned");
        for (k, l) in lengths.iter().enumerate() {
            assert!(((p[k + 1] - p[k]).length() - l).abs() < 1e-12, "bone {k} keeps its length");
        }
    }
    // Quadratic: each gap at most a constant times the previous one squared.
    for w in gaps.windows(2) {
        assert!(w[1] <= w[0] * w[0], "gaps {gaps:?}");
    }
    assert!(gaps[3] < 1e-9, "gaps {gaps:?}");
}

#[test]
fn chain_position_step_refuses_a_straight_chain() {
    // Straight along +Y: no turn lengthens or shortens it to first order.
    let mut p: Vec<DVec3> = (0..4).map(|k| DVec3::Y * f64::from(k)).collect();
    let before = p.clone();
    assert!(!chain_position_step(&mut p, DVec3::Y * 2.5));
    assert_eq!(p, before);
}

/// A torso with two offset arms: a free root, a hinge elbow, a stiff shoulder; one goal with
/// an orientation, one with a pole kept in the tree; and a second root with a goal of its own.
/// Per-axis stiffness on the root (its own three axes), the spine (blocked in the test below)
/// and the right forearm (twist locked: it swings only). Every kind of unknown and row.
fn torso() -> (Problem, Pose) {
    let bone = |name: &str, parent: Option<usize>, head: DVec3, rot: DQuat, length: f64, limit: JointLimit| Bone {
        name: name.into(),
        parent,
        rest_head: head,
        rest_rotation: rot,
        length,
        limit,
    };
    let free = JointLimit::FREE;
    let hinge = JointLimit { swing: Swing::Hinge(HingeLimit { axis: DVec3::X, min: -2.5, max: 0.5 }), ..free };
    let stiff = JointLimit { stiffness: 0.3, ..free };
    let axes = |a: [f64; 3]| JointLimit { stiffness: a[0].max(a[1]).max(a[2]), stiffness_axes: Some(a), ..free };
    let swinging = JointLimit { twist: Some(crate::limits::TwistLimit { min: 0.0, max: 0.0 }), ..axes([0.2, 0.0, 0.7]) };
    let rig = Rig::new(vec![
        bone("root", None, DVec3::new(0.1, 0.0, 0.2), DQuat::IDENTITY, 1.0, axes([0.5, 0.2, 0.0])),
        bone("spine", Some(0), DVec3::new(0.0, 1.0, 0.0), DQuat::from_rotation_x(0.1), 1.0, axes([0.6, 0.1, 0.3])),
        bone("arm.L", Some(1), DVec3::new(0.3, 1.0, 0.0), DQuat::from_rotation_z(-1.5), 0.8, free),
        bone("fore.L", Some(2), DVec3::new(0.0, 0.8, 0.0), DQuat::from_rotation_x(-0.3), 0.7, hinge),
        bone("arm.R", Some(1), DVec3::new(-0.3, 1.0, 0.05), DQuat::from_rotation_z(1.5), 0.8, stiff),
        bone("fore.R", Some(4), DVec3::new(0.0, 0.8, 0.0), DQuat::from_rotation_x(-0.2), 0.7, swinging),
        // A second root (a prop): the root's translation does not carry it.
        bone("prop", None, DVec3::new(2.0, 0.0, 0.0), DQuat::from_rotation_z(0.3), 0.5, free),
        bone("prop.tip", Some(6), DVec3::new(0.0, 0.5, 0.0), DQuat::IDENTITY, 0.4, free),
    ])
    .unwrap();
    let goals = vec![
        Goal::new(3, DVec3::new(1.2, 1.5, 0.6)).with_orientation(DQuat::IDENTITY).with_weight(2.0),
        Goal::new(5, DVec3::new(-1.1, 1.4, 0.5)).with_pole(DVec3::new(-0.5, 1.0, -2.0), 0.3),
        Goal::new(7, DVec3::new(2.3, 0.6, 0.2)),
    ];
    let mut problem = Problem::new(rig, goals, RootMode::Free).unwrap();
    let pose = Pose {
        rotations: (0..8).map(|i| DQuat::from_euler(glam::EulerRot::XYZ, 0.1 * i as f64, -0.05 * i as f64, 0.2)).collect(),
        root_translation: DVec3::new(0.05, -0.02, 0.1),
        scales: Vec::new(),
    };
    let mut pose = pose;
    pose.rotations[3] = DQuat::from_rotation_x(-0.7);
    // A pure swing, inside the forearm's locked twist.
    pose.rotations[5] = DQuat::from_axis_angle(DVec3::new(0.6, 0.0, 0.8), 0.5);
    // The orientation rows are linearised about a met orientation (their Jacobian is the
    // turn itself there, as the steps assume near convergence).
    let met = problem.rig().forward(&pose).rotations[3];
    problem.set_orientation(0, Some(met)).unwrap();
    (problem, pose)
}

/// `J` by central differences of step `eps`, a column per unknown of `steps`' joints
/// (residual = target − effector, so `J` is minus its derivative).
fn finite_difference_columns(problem: &Problem, pose: &Pose, steps: &DlsSteps, m: usize, eps: f64) -> Vec<Vec<f64>> {
    let mut columns = Vec::new();
    for joint in &steps.joints {
        for c in 0..joint.count {
            let plus = moved_residual(problem, pose, &steps.frames, joint, c, eps, &steps.tree_poles, m);
            let minus = moved_residual(problem, pose, &steps.frames, joint, c, -eps, &steps.tree_poles, m);
            columns.push((0..m).map(|i| -(plus[i] - minus[i]) / (2.0 * eps)).collect());
        }
    }
    columns
}

/// The steps' Gram matrix (lower triangle) equals `J Jᵀ` of `columns` within 1e-5, relative.
fn assert_gram_matches(steps: &DlsSteps, columns: &[Vec<f64>], m: usize) {
    for i in 0..m {
        for j in 0..=i {
            let dense: f64 = columns.iter().map(|col| col[i] * col[j]).sum();
            let got = steps.gram.get(i, j);
            assert!((got - dense).abs() < 1e-5 * (1.0 + dense.abs()), "J Jᵀ[{i}][{j}] = {got} but finite differences give {dense}");
        }
    }
}

/// The residual after moving unknown `c` of `joint` by `eps`, as a step would.
#[allow(clippy::too_many_arguments)] // a test helper: the step's inputs, spelled out
fn moved_residual(problem: &Problem, pose: &Pose, frames: &Frames, joint: &Joint, c: usize, eps: f64, tree_poles: &[usize], m: usize) -> Vec<f64> {
    let mut p = pose.clone();
    match joint.bone {
        Some(b) if joint.stretch.is_some() => p.scales[b] += joint.gain * joint.stretch.unwrap_or(1.0) * eps,
        None => p.root_translation += problem.rig().bone(0).rest_rotation.conjugate() * (DVec3::AXES[c] * eps),
        Some(b) => {
            let world = frames.rotations[b];
            p.rotations[b] = pose.rotations[b] * from_rotation_vector(world.conjugate() * (joint.axes[c] * (eps * joint.gain)));
        }
    }
    let mut r = vec![0.0; m];
    evaluate(problem, tree_poles, &p, &mut Frames::default(), &mut r);
    r
}

/// The length unknowns of stretchy bones: their columns of `J` (through connected and offset
/// children, to tails and heads, beside orientation rows they do not move) and the step they
/// take match finite differences of the residual, the scales changing by `gain · k` times it.
#[test]
fn stretch_columns_match_finite_differences() {
    let bone = |name: &str, parent: Option<usize>, head: DVec3, rot: DQuat, length: f64, stretch: f64| Bone {
        name: name.into(),
        parent,
        rest_head: head,
        rest_rotation: rot,
        length,
        limit: JointLimit { stretch, ..JointLimit::FREE },
    };
    let rig = Rig::new(vec![
        bone("root", None, DVec3::ZERO, DQuat::from_rotation_x(0.2), 1.0, 0.3),
        // An offset child: its head moves with the root's scale, off the root's axis.
        bone("arm", Some(0), DVec3::new(0.2, 0.8, -0.1), DQuat::from_rotation_z(-0.7), 0.8, 0.1),
        bone("fore", Some(1), DVec3::new(0.0, 0.8, 0.0), DQuat::from_rotation_x(-0.4), 0.6, 1.0),
        bone("side", Some(0), DVec3::new(-0.2, 1.0, 0.0), DQuat::from_rotation_z(1.2), 0.5, 0.0),
    ])
    .unwrap();
    let goals = vec![
        Goal::new(2, DVec3::new(1.2, 1.4, 0.3)).with_orientation(DQuat::IDENTITY).with_weight(2.0),
        // Its head: the arm's scale moves it, its own does not.
        Goal { use_tail: false, ..Goal::new(2, DVec3::new(0.9, 1.2, 0.2)) },
        Goal::new(3, DVec3::new(-0.8, 1.3, 0.4)),
    ];
    let mut problem = Problem::new(rig, goals, RootMode::Pinned).unwrap();
    let pose = Pose {
        rotations: (0..4).map(|i| DQuat::from_euler(glam::EulerRot::XYZ, 0.1 * i as f64, -0.05 * i as f64, 0.2)).collect(),
        root_translation: DVec3::ZERO,
        scales: vec![1.1, 0.9, 1.3, 1.0],
    };
    let met = problem.rig().forward(&pose).rotations[2];
    problem.set_orientation(0, Some(met)).unwrap();
    let mut steps = DlsSteps::default();
    steps.collect_joints(&problem);
    assert_eq!(steps.joints.iter().filter(|j| j.stretch.is_some()).count(), 3);
    // The fore bone's length moves neither the goal on its head nor the side bone.
    let fore = steps.joints.iter().position(|j| j.stretch.is_some() && j.bone == Some(2)).unwrap();
    assert_eq!(&steps.reaches[steps.reach_start[fore]..steps.reach_start[fore + 1]], &[0]);
    let m = 6 + 3 + 3;
    for v in [&mut steps.residual, &mut steps.rhs, &mut steps.trial_residual] {
        v.resize(m, 0.0);
    }
    steps.layout_gram(&problem, m);
    steps.blocked = vec![None; 4];
    evaluate(&problem, &steps.tree_poles, &pose, &mut steps.frames, &mut steps.residual);
    steps.linearize(&problem);
    steps.gram_into();
    let eps = 1e-6;
    let columns = finite_difference_columns(&problem, &pose, &steps, m, eps);
    assert_gram_matches(&steps, &columns, m);
    // The step on a length: Jᵀ y, times gain · k on the scale.
    let y: Vec<f64> = (0..m).map(|i| 1e-3 * ((i as f64 * 1.3).cos())).collect();
    let trial = step_by_jt(&mut steps, &problem, &pose, &y);
    let mut k = 0;
    for joint in &steps.joints {
        if let (Some(b), Some(per)) = (joint.bone, joint.stretch) {
            let step: f64 = (0..m).map(|i| columns[k][i] * y[i]).sum();
            let expected = pose.scales[b] + joint.gain * per * step;
            assert!((trial.scales[b] - expected).abs() < 1e-9, "bone {b}: scale {} but finite differences give {expected}", trial.scales[b]);
        }
        k += joint.count;
    }
}

/// `pose` after the step `Jᵀ y` (the twist each swinging bone keeps: `pose`'s).
fn step_by_jt(steps: &mut DlsSteps, problem: &Problem, pose: &Pose, y: &[f64]) -> Pose {
    steps.rhs.copy_from_slice(y);
    let mut trial = pose.clone();
    steps.kept_twist = pose.rotations.iter().map(|&q| swing_twist_y(q).1).collect();
    steps.apply_step(problem, pose, &mut trial, 0.0, false);
    trial
}

#[test]
fn implicit_jacobian_matches_finite_differences() {
    let (problem, pose) = torso();
    let mut steps = DlsSteps::default();
    steps.collect_joints(&problem);
    assert_eq!(steps.tree_poles, vec![1], "the pole is kept in the tree");
    let m = 6 + 3 + 3 + 1;
    steps.residual.resize(m, 0.0);
    steps.rhs.resize(m, 0.0);
    steps.layout_gram(&problem, m);
    steps.blocked = vec![None; 8];
    // A blocked direction on the spine: its axes are projected.
    steps.blocked[1] = Some(DVec3::new(0.6, 0.0, 0.8));
    evaluate(&problem, &steps.tree_poles, &pose, &mut steps.frames, &mut steps.residual);
    steps.linearize(&problem);
    steps.gram_into();
    // J by central differences, a column per unknown (residual = target − effector, so J is
    // minus its derivative).
    let eps = 1e-6;
    let columns = finite_difference_columns(&problem, &pose, &steps, m, eps);
    // Unknowns: a hinge's one axis; three for a bone an orientation goal moves (less the
    // blocked direction's, which projects them onto a plane); two across any other bone
    // (one when blocked); three for the root's translation.
    for joint in &steps.joints {
        let expected = match joint.bone {
            None => 3,
            Some(b) if matches!(steps.freedom[b], Freedom::Hinge(_)) => 1,
            Some(b) if !steps.freedom[b].holds_twist() => 3,
            Some(b) if steps.blocked[b].is_some() => 1,
            Some(_) => 2,
        };
        assert_eq!(joint.count, expected, "{joint:?}");
    }
    assert!(steps.freedom.contains(&Freedom::Ball));
    assert!(steps.freedom[5].holds_twist(), "the forearm swings only");
    assert_eq!(steps.joints.iter().filter(|j| j.ratios.is_some()).count(), 3, "per-axis stiffness on three bones");
    assert_gram_matches(&steps, &columns, m);
    // The step: Jᵀ y per unknown, applied as each bone's world turn.
    let y: Vec<f64> = (0..m).map(|i| 1e-3 * ((i as f64 * 1.7).sin())).collect();
    let trial = step_by_jt(&mut steps, &problem, &pose, &y);
    let mut k = 0;
    for joint in &steps.joints {
        let mut turn = DVec3::ZERO;
        for c in 0..joint.count {
            let step: f64 = (0..m).map(|i| columns[k][i] * y[i]).sum();
            turn += joint.axes[c] * step * joint.gain;
            k += 1;
        }
        match joint.bone {
            None => {
                let t = problem.rig().bone(0).rest_rotation.conjugate() * turn;
                assert!((trial.root_translation - (pose.root_translation + t)).length() < 1e-9);
            }
            Some(b) => {
                let world = steps.frames.rotations[b];
                let mut expected = pose.rotations[b] * from_rotation_vector(world.conjugate() * turn);
                if steps.freedom[b].holds_twist() {
                    // A swinging bone keeps its twist.
                    expected = swing_twist_y(expected).0 * steps.kept_twist[b];
                }
                let got = trial.rotations[b];
                assert!(angle_between(got, expected) < 1e-9, "bone {b}: turned {got:?}, finite differences give {expected:?}");
            }
        }
    }
}

/// The dense `J` the factoring methods use is the implicit one of the steps: `J Jᵀ` equals
/// the Gram matrix block by block, and a step `Jᵀ y` through [`DlsSteps::try_step`] turns
/// the bones as the steps' own `apply_step` does.
#[test]
fn the_dense_jacobian_is_the_steps_jacobian() {
    let (problem, pose) = torso();
    dense_jacobian_matches(&problem, pose, 6 + 3 + 3 + 1);
    // With stretchy bones (a length unknown each, before the free root's translation).
    let bone = |name: &str, parent: Option<usize>, head: DVec3, length: f64, stretch: f64| Bone {
        name: name.into(),
        parent,
        rest_head: head,
        rest_rotation: DQuat::from_rotation_z(0.3),
        length,
        limit: JointLimit { stretch, ..JointLimit::FREE },
    };
    let rig = Rig::new(vec![
        bone("root", None, DVec3::ZERO, 1.0, 0.3),
        bone("arm", Some(0), DVec3::new(0.2, 1.0, -0.1), 0.8, 0.7),
        bone("fore", Some(1), DVec3::new(0.0, 0.8, 0.0), 0.6, 0.0),
    ])
    .unwrap();
    let goals = vec![Goal::new(2, DVec3::new(1.2, 1.9, 0.3)).with_orientation(DQuat::from_rotation_x(0.4)), Goal::new(1, DVec3::new(0.5, 1.5, 0.2))];
    let mut problem = Problem::new(rig, goals, RootMode::Free).unwrap();
    let pose = Pose {
        rotations: (0..3).map(|i| DQuat::from_euler(glam::EulerRot::XYZ, 0.1 * i as f64, -0.2, 0.1)).collect(),
        root_translation: DVec3::new(0.1, 0.0, -0.1),
        scales: vec![1.2, 0.8, 1.0],
    };
    // (At its orientation: the rotation rows' derivative is `spin · a` there.)
    let met = problem.rig().forward(&pose).rotations[2];
    problem.set_orientation(0, Some(met)).unwrap();
    let steps = dense_jacobian_matches(&problem, pose, 6 + 3);
    assert_eq!(steps.joints.iter().filter(|j| j.stretch.is_some()).count(), 2);
}

/// [`the_dense_jacobian_is_the_steps_jacobian`] on one problem with `m` rows.
fn dense_jacobian_matches(problem: &Problem, mut pose: Pose, rows: usize) -> DlsSteps {
    let mut steps = DlsSteps::default();
    let m = steps.start_explicit(problem, &mut pose);
    assert_eq!(m, rows);
    let mut jac = Vec::new();
    let n = steps.dense_jacobian(problem, &mut jac);
    assert_eq!(n, steps.joints.iter().map(|j| j.count).sum::<usize>());
    assert!(steps.translates_root());
    steps.gram_into();
    for i in 0..m {
        for j in 0..=i {
            let dense: f64 = (0..n).map(|c| jac[c * m + i] * jac[c * m + j]).sum();
            let got = steps.gram.get(i, j);
            assert!((got - dense).abs() < 1e-12 * (1.0 + dense.abs()), "J Jᵀ[{i}][{j}] = {got}, dense {dense}");
        }
    }
    // A small step: the residual moves by −J Jᵀ y to first order.
    let y: Vec<f64> = (0..m).map(|i| 1e-6 * ((i as f64 * 0.7).cos())).collect();
    let before = steps.residual_rows().to_vec();
    steps.try_step(problem, &pose, &y);
    let mut after = pose.clone();
    steps.accept_trial(&mut after);
    let jty: Vec<f64> = (0..n).map(|c| (0..m).map(|i| jac[c * m + i] * y[i]).sum()).collect();
    for i in 0..m {
        let predicted: f64 = -(0..n).map(|c| jac[c * m + i] * jty[c]).sum::<f64>();
        let moved = steps.residual_rows()[i] - before[i];
        assert!((moved - predicted).abs() < 1e-3 * predicted.abs().max(1e-9), "row {i}: moved {moved:e}, J Jᵀ y predicts {predicted:e}");
    }
    steps
}

/// A reference pose for [`torso`]: every bone turned from the pose, the root moved.
fn torso_reference() -> Pose {
    Pose {
        rotations: (0..8).map(|i| DQuat::from_euler(glam::EulerRot::XYZ, -0.07 * i as f64, 0.1, 0.03 * i as f64)).collect(),
        root_translation: DVec3::new(0.3, 0.1, -0.2),
        scales: Vec::new(),
    }
}

/// The metric toward the reference is the steps' own: at a pose (no blocked direction) the
/// coordinates of the turns toward the reference, each over its axis's gain, add up to
/// [`DlsSteps::reference_distance`] (per-axis stiffness included), up to the swinging bone's
/// first-order axes.
#[test]
fn the_reference_metric_is_the_coordinates_over_the_gains() {
    let (problem, pose) = torso();
    let mut steps = DlsSteps::default();
    let mut reference = torso_reference();
    // The swinging forearm's reference keeps its (locked) twist.
    reference.rotations[5] = DQuat::from_axis_angle(DVec3::new(-0.3, 0.0, 1.0).normalize(), 0.2);
    steps.reference = Some(reference);
    steps.collect_joints(&problem);
    let m = 6 + 3 + 3 + 1;
    steps.residual.resize(m, 0.0);
    steps.blocked = vec![None; 8];
    evaluate(&problem, &steps.tree_poles, &pose, &mut steps.frames, &mut steps.residual);
    steps.linearize(&problem);
    steps.turns_toward_reference(&problem, &pose);
    let from_coords: f64 = steps.toward.iter().map(|(_, c)| c.iter().map(|x| x * x).sum::<f64>()).sum();
    let distance = steps.reference_distance(&problem, &pose);
    assert!((from_coords - distance).abs() < 0.02 * distance, "coordinates give {from_coords}, the distance is {distance}");
    // Without the swinging bone and the hinge (whose reference here is off its axis),
    // exactly.
    let kept = |j: &Joint| j.bone != Some(5) && j.bone != Some(3);
    let exact: f64 = steps.joints.iter().zip(&steps.toward).filter(|(j, _)| kept(j)).map(|(_, (_, c))| c.iter().map(|x| x * x).sum::<f64>()).sum();
    let mut only = steps.clone();
    only.joints.retain(kept);
    let d = only.reference_distance(&problem, &pose);
    assert!((exact - d).abs() < 1e-9 * d, "coordinates give {exact}, the distance is {d}");
}

/// A bone stiff about its local X but free about Z reaches by turning about Z: its local
/// rotation's X component shrinks, its Z component grows, against the same bone free (and
/// the other way round when it is stiff about Z), with the DLS solver and with FABRIK
/// toward a reference (whose steps toward it are these).
#[test]
fn a_bone_stiff_about_x_reaches_by_turning_about_z() {
    use crate::solver::{Method, SolveSettings};
    let solve = |method: Method, stiffness: Option<[f64; 3]>| {
        let limit = JointLimit { stiffness: stiffness.map_or(0.0, |a| a[0].max(a[1]).max(a[2])), stiffness_axes: stiffness, ..JointLimit::FREE };
        let bone = |name: &str, parent: Option<usize>, head: DVec3, limit: JointLimit| Bone {
            name: name.into(),
            parent,
            rest_head: head,
            rest_rotation: DQuat::IDENTITY,
            length: 1.0,
            limit,
        };
        let rig = Rig::new(vec![
            bone("upper", None, DVec3::ZERO, limit),
            bone("lower", Some(0), DVec3::Y, JointLimit::FREE),
            bone("hand", Some(1), DVec3::Y, JointLimit::FREE),
        ])
        .unwrap();
        // Reached by bending forward (about X) and sideways (about Z).
        let mut problem = Problem::new(rig, vec![Goal::new(2, DVec3::new(-1.0, 1.6, 1.0))], RootMode::Pinned).unwrap();
        let rest = Pose { rotations: vec![DQuat::IDENTITY; 3], root_translation: DVec3::ZERO, scales: Vec::new() };
        problem.set_reference(Reference::Pose(rest.clone())).unwrap();
        let mut solver = method.solver(SolveSettings::default()).unwrap();
        let solution = solver.solve(&problem, &rest).unwrap();
        assert!(solution.reached, "{method:?} {stiffness:?}: {:?}", solution.residuals);
        rotation_vector(solution.pose.rotations[0])
    };
    for method in [Method::Dls, Method::Fabrik] {
        let free = solve(method, None);
        let stiff_x = solve(method, Some([0.9, 0.0, 0.0]));
        let stiff_z = solve(method, Some([0.0, 0.0, 0.9]));
        assert!(free.x.abs() > 0.05 && free.z.abs() > 0.05, "{method:?}: free {free}");
        assert!(stiff_x.x.abs() < 0.5 * free.x.abs() && stiff_x.z.abs() > free.z.abs(), "{method:?}: stiff about X {stiff_x}, free {free}");
        assert!(stiff_z.z.abs() < 0.5 * free.z.abs() && stiff_z.x.abs() > free.x.abs(), "{method:?}: stiff about Z {stiff_z}, free {free}");
    }
}

/// The turn toward the reference moves the residual by `−J d` to first order.
#[test]
fn the_pull_toward_the_reference_moves_the_residual_by_j_d() {
    let (problem, pose) = torso();
    let mut steps = DlsSteps::default();
    let reference = torso_reference();
    steps.reference = Some(reference);
    steps.collect_joints(&problem);
    let m = 6 + 3 + 3 + 1;
    for v in [&mut steps.residual, &mut steps.trial_residual, &mut steps.rhs] {
        v.resize(m, 0.0);
    }
    steps.layout_gram(&problem, m);
    steps.blocked = vec![None; 8];
    steps.kept_twist = pose.rotations.iter().map(|&q| swing_twist_y(q).1).collect();
    evaluate(&problem, &steps.tree_poles, &pose, &mut steps.frames, &mut steps.residual);
    let r0 = steps.residual.clone();
    steps.linearize(&problem);
    steps.turns_toward_reference(&problem, &pose);
    let beta = 1e-6;
    steps.rhs.fill(0.0);
    steps.subtract_j_toward(beta);
    let predicted = steps.rhs.clone();
    steps.rhs.fill(0.0);
    let mut trial = pose.clone();
    steps.apply_step(&problem, &pose, &mut trial, beta, false);
    let mut r1 = vec![0.0; m];
    evaluate(&problem, &steps.tree_poles, &trial, &mut Frames::default(), &mut r1);
    for i in 0..m {
        let got = r1[i] - r0[i];
        assert!((got - predicted[i]).abs() < 1e-3 * beta, "row {i}: moved {got:e}, J d predicts {:e}", predicted[i]);
    }
}
