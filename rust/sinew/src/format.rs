//! The JSON problem format (`"format": "sinew.problem/1"`): a rig with its limits, goals, solver
//! settings and an optional start pose, in one file. Quaternions are `[w, x, y, z]` (Blender's
//! order), angles radians, positions rig space. The README documents it with an example.

use glam::{DMat4, DQuat, DVec3};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::goal::{Goal, GoalKind, Pole};
use crate::limits::JointLimit;
use crate::pose::Pose;
use crate::problem::{Problem, Reference, RootMode};
use crate::rig::{Bone, Rig, rotation_from_head_tail};
use crate::solver::{Method, SolveSettings, Solution, StopReason};

/// The format tag of a file whose goals are all position goals: this version reads it, and
/// older versions do.
pub const FORMAT: &str = "sinew.problem/1";

/// The format tag of a file with goals of other kinds (`"kind"`, with `axis`, `direction` or
/// `normal`); this version reads it too. A `sinew.problem/1` file must not use them, so a
/// version that reads only `/1` refuses such a file by its tag.
pub const FORMAT_WITH_KINDS: &str = "sinew.problem/2";

/// One bone in a problem file: rest given either as `matrix` (armature space, 4 rows, as
/// Blender's `bone.matrix_local`) with `length`, or as `head`, `tail` and optional `roll`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoneFile {
    /// Unique name.
    pub name: String,
    /// Parent's name, or null for a root.
    #[serde(default)]
    pub parent: Option<String>,
    /// Armature-space rest matrix, row by row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matrix: Option<[[f64; 4]; 4]>,
    /// Length (required with `matrix`; derived from head and tail otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<f64>,
    /// Head in armature space.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<[f64; 3]>,
    /// Tail in armature space.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<[f64; 3]>,
    /// Roll about the bone's axis, radians.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roll: Option<f64>,
    /// Joint limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<JointLimit>,
    /// How readily the bone changes length, in [0, 1] ([`JointLimit::stretch`], Blender's
    /// `ik_stretch`; absent: 0, rigid).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stretch: Option<f64>,
}

/// A pole in a problem file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoleFile {
    /// Pole position.
    pub target: [f64; 3],
    /// Pole angle, radians.
    #[serde(default)]
    pub angle: f64,
}

/// A goal in a problem file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoalFile {
    /// Effector bone name.
    pub bone: String,
    /// Target position.
    pub target: [f64; 3],
    /// Optional target orientation `[w, x, y, z]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orientation: Option<[f64; 4]>,
    /// Weight (default 1).
    #[serde(default = "one")]
    pub weight: f64,
    /// Bones from the effector up that may move; 0 = to the root (default).
    #[serde(default)]
    pub chain_length: usize,
    /// Optional pole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pole: Option<PoleFile>,
    /// Pull the tail (default) or the head.
    #[serde(default = "yes")]
    pub use_tail: bool,
    /// The goal's kind, one of `crate::GoalKind::NAMES` (default `"position"`; others need
    /// [`FORMAT_WITH_KINDS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// An aim goal's bone axis, in the bone's frame (default `[0, 1, 0]`, along the bone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axis: Option<[f64; 3]>,
    /// A line goal's direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<[f64; 3]>,
    /// A plane or half-space goal's normal (into the allowed side for a half-space).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normal: Option<[f64; 3]>,
}

impl GoalFile {
    /// The goal's kind from `kind` and its vector field ([`GoalKind::from_fields`]).
    fn goal_kind(&self, gi: usize) -> Result<GoalKind> {
        let v = |a: Option<[f64; 3]>| a.map(DVec3::from_array);
        GoalKind::from_fields(self.kind.as_deref().unwrap_or("position"), v(self.axis), v(self.direction), v(self.normal))
            .map_err(|reason| Error::BadGoal { goal: gi, reason })
    }
}

fn one() -> f64 {
    1.0
}
fn yes() -> bool {
    true
}

/// Solver choice and settings in a problem file.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsFile {
    /// The method (default `fabrik`).
    #[serde(default)]
    pub method: Method,
    /// Shared settings.
    #[serde(flatten)]
    pub settings: SolveSettings,
}

/// A start pose in a problem file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoseFile {
    /// One `[w, x, y, z]` per bone.
    pub rotations: Vec<[f64; 4]>,
    /// Bone 0's translation in its rest frame.
    #[serde(default)]
    pub root_translation: [f64; 3],
    /// Optional length scale per bone ([`Pose::scales`]; absent: every bone at 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scales: Vec<f64>,
}

impl PoseFile {
    /// The pose this describes (quaternions as given, not yet normalised).
    #[must_use]
    pub fn to_pose(&self) -> Pose {
        Pose {
            // Huge components are scaled exactly first, so they normalise without overflow.
            rotations: self.rotations.iter().copied().map(|q| crate::problem::rescaled_quat(quat_from_wxyz(q))).collect(),
            root_translation: DVec3::from_array(self.root_translation),
            scales: self.scales.clone(),
        }
    }

    /// Describes `pose`.
    #[must_use]
    pub fn from_pose(pose: &Pose) -> Self {
        Self { rotations: pose.rotations.iter().copied().map(quat_to_wxyz).collect(), root_translation: pose.root_translation.to_array(), scales: pose.scales.clone() }
    }
}

/// A file's `"reference"` ([`Reference`]): `"rest"` (also when absent), `"least_motion"`, or a
/// pose written as `pose` is.
#[derive(Debug, Clone, PartialEq)]
pub enum ReferenceFile {
    /// `"rest"`: [`Reference::Rest`].
    Rest,
    /// A pose: [`Reference::Pose`].
    Pose(PoseFile),
    /// `"least_motion"`: [`Reference::LeastMotion`].
    LeastMotion,
}

impl Serialize for ReferenceFile {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Self::Rest => s.serialize_str(Reference::REST_NAME),
            Self::LeastMotion => s.serialize_str(Reference::LEAST_MOTION_NAME),
            Self::Pose(p) => p.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ReferenceFile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        let (rest, least_motion) = (Reference::REST_NAME, Reference::LEAST_MOTION_NAME);
        let bad = |what: String| D::Error::custom(format!("reference {what} is not \"{rest}\", \"{least_motion}\" or a pose"));
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::String(s) => match Reference::named(&s) {
                Some(Reference::Rest) => Ok(Self::Rest),
                Some(Reference::LeastMotion) => Ok(Self::LeastMotion),
                Some(Reference::Pose(_)) | None => Err(bad(format!("\"{s}\""))),
            },
            v @ serde_json::Value::Object(_) => PoseFile::deserialize(v).map(Self::Pose).map_err(|e| D::Error::custom(format!("reference: {e}"))),
            other => Err(bad(other.to_string())),
        }
    }
}

/// A whole problem file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProblemFile {
    /// Must be [`FORMAT`].
    pub format: String,
    /// Bones, parent before child.
    pub bones: Vec<BoneFile>,
    /// Goals.
    #[serde(default)]
    pub goals: Vec<GoalFile>,
    /// Root pinned (default) or free.
    #[serde(default)]
    pub root: RootMode,
    /// Solver settings.
    #[serde(default)]
    pub settings: SettingsFile,
    /// Optional start pose (rest pose when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pose: Option<PoseFile>,
    /// Optional reference: where the freedom the goals leave falls back to
    /// ([`Problem::reference`]; the rest pose when absent). A pose is validated as `pose` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<ReferenceFile>,
}

/// A problem read from a file, with the settings and start pose it carries.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedProblem {
    /// The rig, goals and root mode.
    pub problem: Problem,
    /// The method asked for.
    pub method: Method,
    /// The settings asked for (validated).
    pub settings: SolveSettings,
    /// The start pose (rest pose when the file has none).
    pub pose: Pose,
}

/// `[w, x, y, z]` to a quaternion.
#[must_use]
pub fn quat_from_wxyz(q: [f64; 4]) -> DQuat {
    DQuat::from_xyzw(q[1], q[2], q[3], q[0])
}

/// A quaternion to `[w, x, y, z]`.
#[must_use]
pub fn quat_to_wxyz(q: DQuat) -> [f64; 4] {
    [q.w, q.x, q.y, q.z]
}

impl ProblemFile {
    /// Parses JSON text.
    ///
    /// # Errors
    /// [`Error::Format`] with serde's message (line and column) or a wrong `format` tag.
    pub fn from_json(text: &str) -> Result<Self> {
        let file: ProblemFile = serde_json::from_str(text).map_err(|e| Error::Format(e.to_string()))?;
        file.check_format()?;
        Ok(file)
    }

    /// Checks the `format` tag: [`FORMAT`], or [`FORMAT_WITH_KINDS`] (which goal kinds need).
    ///
    /// # Errors
    /// [`Error::Format`] for another tag, or a goal with a kind in a [`FORMAT`] file.
    pub fn check_format(&self) -> Result<()> {
        if self.format != FORMAT && self.format != FORMAT_WITH_KINDS {
            return Err(Error::Format(format!("format is \"{}\"; this version reads \"{FORMAT}\" and \"{FORMAT_WITH_KINDS}\"", self.format)));
        }
        if self.format == FORMAT
            && let Some(gi) = self.goals.iter().position(|g| g.kind.is_some() || g.axis.is_some() || g.direction.is_some() || g.normal.is_some())
        {
            return Err(Error::Format(format!("goal {gi} has a kind: goal kinds need \"format\": \"{FORMAT_WITH_KINDS}\"")));
        }
        Ok(())
    }

    /// Pretty JSON text.
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Builds and validates the rig, goals, settings and pose.
    ///
    /// # Errors
    /// Any rig, limit, goal or setting error, or [`Error::Format`] for a bone given neither
    /// `matrix` + `length` nor `head` + `tail`, or an unknown parent name.
    pub fn load(&self) -> Result<LoadedProblem> {
        let mut index = std::collections::HashMap::new();
        let mut bones = Vec::with_capacity(self.bones.len());
        let mut world: Vec<(DQuat, DVec3)> = Vec::with_capacity(self.bones.len());
        for (i, b) in self.bones.iter().enumerate() {
            let parent = match &b.parent {
                None => None,
                Some(p) => match index.get(p.as_str()) {
                    Some(&i) => Some(i),
                    None if *p == b.name => {
                        return Err(Error::Format(format!("bone \"{}\" names itself as its parent", b.name)));
                    }
                    // Only on the way out with an error: loading stays linear.
                    None if self.bones.iter().any(|o| &o.name == p) => {
                        return Err(Error::Format(format!(
                            "bone \"{}\": parent \"{p}\" comes after it; bones must be listed parent before child",
                            b.name
                        )));
                    }
                    None => return Err(Error::UnknownBone { bone: format!("\"{p}\" (parent of bone \"{}\")", b.name) }),
                },
            };
            let (rot, head, length) = match (&b.matrix, &b.head, &b.tail) {
                (Some(m), None, None) => {
                    let m = DMat4::from_cols_array_2d(m).transpose();
                    let len = b.length.ok_or_else(|| Error::Format(format!("bone \"{}\": `matrix` needs `length`", b.name)))?;
                    let r = Rig::from_matrices(std::slice::from_ref(&b.name), &[None], &[m], &[len])?;
                    (r.bone(0).rest_rotation, r.bone(0).rest_head, len)
                }
                (None, Some(h), Some(t)) => {
                    let (h, t) = (DVec3::from_array(*h), DVec3::from_array(*t));
                    let len = (t - h).length();
                    (rotation_from_head_tail(h, t, b.roll.unwrap_or(0.0)), h, len)
                }
                _ => {
                    return Err(Error::Format(format!(
                        "bone \"{}\": give either `matrix` and `length`, or `head` and `tail`",
                        b.name
                    )));
                }
            };
            let (rest_rotation, rest_head) = match parent {
                Some(p) => {
                    let (pr, ph): (DQuat, DVec3) = world[p];
                    (pr.conjugate() * rot, pr.conjugate() * (head - ph))
                }
                None => (rot, head),
            };
            index.insert(b.name.as_str(), i);
            world.push((rot, head));
            bones.push(Bone {
                name: b.name.clone(),
                parent,
                rest_head,
                rest_rotation,
                length,
                limit: JointLimit { stretch: b.stretch.unwrap_or(0.0), ..b.limit.unwrap_or_default() },
            });
        }
        let rig = Rig::new(bones)?;
        let mut goals = Vec::with_capacity(self.goals.len());
        for (gi, g) in self.goals.iter().enumerate() {
            let bone = rig.find(&g.bone).ok_or_else(|| Error::UnknownBone { bone: format!("\"{}\" (effector of goal {gi})", g.bone) })?;
            goals.push(Goal {
                bone,
                target: DVec3::from_array(g.target),
                orientation: g.orientation.map(quat_from_wxyz),
                weight: g.weight,
                chain_length: g.chain_length,
                pole: g.pole.as_ref().map(|p| Pole { target: DVec3::from_array(p.target), angle: p.angle }),
                use_tail: g.use_tail,
                kind: g.goal_kind(gi)?,
            });
        }
        let mut problem = Problem::new(rig, goals, self.root)?;
        let pose = match &self.pose {
            None => Pose::rest(problem.rig().len()),
            Some(p) => problem.checked_pose(&p.to_pose())?,
        };
        if let Some(ReferenceFile::Pose(r)) = &self.reference {
            problem.set_reference(Reference::Pose(r.to_pose())).map_err(|e| match e {
                Error::ShapeMismatch { expected, got, .. } => {
                    Error::ShapeMismatch { what: "reference rotations".into(), expected, got }
                }
                Error::NonFinite { what } => Error::NonFinite { what: format!("reference: {what}") },
                other => other,
            })?;
        } else if let Some(ReferenceFile::LeastMotion) = &self.reference {
            problem.set_reference(Reference::LeastMotion)?;
        }
        Ok(LoadedProblem { problem, method: self.settings.method, settings: self.settings.settings.validated()?, pose })
    }
}

/// A solution as written by the command line and read by tools: rotations `[w, x, y, z]` per bone
/// name, root translation, residuals per goal, iterations, reached, stop reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SolutionFile {
    /// Always [`FORMAT`]'s solution counterpart, `sinew.solution/1`.
    pub format: String,
    /// Method used.
    pub method: Method,
    /// Bone names, in rig order.
    pub bones: Vec<String>,
    /// Local rotations `[w, x, y, z]`, in rig order.
    pub rotations: Vec<[f64; 4]>,
    /// Bone 0's translation.
    pub root_translation: [f64; 3],
    /// Length scale per bone, in rig order ([`Pose::scales`]): written when some bone stretched
    /// (absent: every bone at 1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scales: Vec<f64>,
    /// Per goal residual distance.
    pub residuals: Vec<f64>,
    /// Per goal orientation residual, radians (0 for a goal without orientation; empty when
    /// read from a file written before it existed).
    #[serde(default)]
    pub orientation_residuals: Vec<f64>,
    /// Iterations used.
    pub iterations: u32,
    /// Whether every goal was reached.
    pub reached: bool,
    /// Why the solver stopped.
    pub stop: StopReason,
}

impl SolutionFile {
    /// Describes `solution` of a problem on `rig`.
    #[must_use]
    pub fn new(rig: &Rig, method: Method, solution: &Solution) -> Self {
        Self {
            format: "sinew.solution/1".into(),
            method,
            bones: rig.bones().iter().map(|b| b.name.clone()).collect(),
            rotations: solution.pose.rotations.iter().copied().map(quat_to_wxyz).collect(),
            root_translation: solution.pose.root_translation.to_array(),
            scales: if solution.pose.scales.iter().all(|&s| s == 1.0) { Vec::new() } else { solution.pose.scales.clone() },
            residuals: solution.residuals.clone(),
            orientation_residuals: solution.orientation_residuals.clone(),
            iterations: solution.iterations,
            reached: solution.reached,
            stop: solution.stop,
        }
    }
}

/// Checks that a solution holds only finite numbers (rotations, root translation, residuals).
/// The adapters (C, Python, command line) call it on every solution before handing it out, so a
/// non-finite number never leaves Sinew with a success status.
///
/// # Errors
/// [`Error::NonFinite`] naming the first non-finite value (from finite, validated input this is
/// a bug in Sinew).
pub fn check_solution_finite(solution: &Solution) -> Result<()> {
    let bug = |what: String| Error::NonFinite { what: format!("{what} of the solution (a bug in Sinew from finite input: please report it)") };
    if let Some(i) = solution.pose.rotations.iter().position(|q| !q.is_finite()) {
        return Err(bug(format!("the rotation of bone {i}")));
    }
    if !solution.pose.root_translation.is_finite() {
        return Err(bug("the root translation".into()));
    }
    if let Some(i) = solution.pose.scales.iter().position(|s| !s.is_finite()) {
        return Err(bug(format!("the length scale of bone {i}")));
    }
    if let Some(g) = solution.residuals.iter().position(|r| !r.is_finite()) {
        return Err(bug(format!("the residual of goal {g}")));
    }
    if let Some(g) = solution.orientation_residuals.iter().position(|r| !r.is_finite()) {
        return Err(bug(format!("the orientation residual of goal {g}")));
    }
    Ok(())
}

impl Problem {
    /// Reads a problem from JSON text (see [`ProblemFile`]).
    ///
    /// # Errors
    /// As [`ProblemFile::from_json`] and [`ProblemFile::load`].
    pub fn from_json(text: &str) -> Result<LoadedProblem> {
        ProblemFile::from_json(text)?.load()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAIN: &str = r#"{
        "format": "sinew.problem/1",
        "bones": [
            {"name": "a", "head": [0,0,0], "tail": [0,0,1]},
            {"name": "b", "parent": "a", "head": [0,0,1], "tail": [0,0,2],
             "limit": {"swing": {"cone": {"x_pos": 0.5, "x_neg": 0.5, "z_pos": 1.0, "z_neg": 1.0}},
                       "twist": {"min": -0.1, "max": 0.1}}}
        ],
        "goals": [{"bone": "b", "target": [0.5, 0, 1.5], "chain_length": 2}],
        "settings": {"method": "fabrik", "max_iterations": 50, "tolerance": 0.001}
    }"#;

    #[test]
    fn reads_a_chain_with_limits() {
        let lp = Problem::from_json(CHAIN).unwrap();
        assert_eq!(lp.problem.rig().len(), 2);
        assert_eq!(lp.settings.max_iterations, 50);
        assert!(lp.problem.rig().bone(1).limit.twist.is_some());
        let f = lp.problem.rig().rest_frames();
        assert!((f.tails[1] - DVec3::new(0.0, 0.0, 2.0)).length() < 1e-12);
    }

    #[test]
    fn bad_files_are_format_errors() {
        assert!(matches!(Problem::from_json("{"), Err(Error::Format(_))));
        assert!(matches!(Problem::from_json(&CHAIN.replace("sinew.problem/1", "x/9")), Err(Error::Format(_))));
        assert!(matches!(Problem::from_json(&CHAIN.replace("\"parent\": \"a\"", "\"parent\": \"zz\"")), Err(Error::UnknownBone { .. })));
        assert!(matches!(Problem::from_json(&CHAIN.replace("\"parent\": \"a\"", "\"parent\": \"b\"")), Err(Error::Format(_))));
        assert!(matches!(Problem::from_json(&CHAIN.replace("\"bone\": \"b\"", "\"bone\": \"q\"")), Err(Error::UnknownBone { .. })));
        assert!(matches!(Problem::from_json(&CHAIN.replace("\"x_pos\": 0.5", "\"x_pos\": 9")), Err(Error::LimitOutOfRange { .. })));
    }

    /// `stiffness` is one number (every axis) or `[x, y, z]` (per local axis); each in [0, 1);
    /// files without it load as before, and a file written back reads the same.
    #[test]
    fn stiffness_is_one_number_or_one_per_axis() {
        let per_axis = CHAIN.replace("\"twist\": {\"min\": -0.1, \"max\": 0.1}", "\"twist\": {\"min\": -0.1, \"max\": 0.1}, \"stiffness\": [0.1, 0.5, 0]");
        let lp = Problem::from_json(&per_axis).unwrap();
        let limit = lp.problem.rig().bone(1).limit;
        assert_eq!(limit.axis_stiffness(), [0.1, 0.5, 0.0]);
        assert_eq!(limit.max_stiffness(), 0.5);
        assert_eq!(Problem::from_json(CHAIN).unwrap().problem.rig().bone(1).limit.axis_stiffness(), [0.0; 3]);
        let one = Problem::from_json(&per_axis.replace("[0.1, 0.5, 0]", "0.25")).unwrap();
        assert_eq!(one.problem.rig().bone(1).limit.axis_stiffness(), [0.25; 3]);
        assert_eq!(one.problem.rig().bone(1).limit.stiffness_axes, None);
        // Written back, read the same.
        let file = ProblemFile::from_json(&per_axis).unwrap();
        let again = ProblemFile::from_json(&file.to_json()).unwrap().load().unwrap();
        assert_eq!(again.problem.rig().bone(1).limit, limit);
        assert!(file.to_json().contains("0.5"), "{}", file.to_json());
        for bad in ["[0.1, 1.0, 0]", "[-0.1, 0, 0]", "[0.1, 0.2]", "1.0"] {
            let r = Problem::from_json(&per_axis.replace("[0.1, 0.5, 0]", bad));
            assert!(matches!(r, Err(Error::LimitOutOfRange { .. } | Error::Format(_))), "{bad}: {r:?}");
        }
        assert!(matches!(Problem::from_json(&per_axis.replace("[0.1, 0.5, 0]", "[0.1, 1.0, 0]")), Err(Error::LimitOutOfRange { .. })));
    }

    fn with_reference(reference: &str) -> String {
        CHAIN.replace("\"settings\":", &format!("\"reference\": {reference},\n        \"settings\":"))
    }

    #[test]
    fn reads_a_reference_pose() {
        assert_eq!(Problem::from_json(CHAIN).unwrap().problem.reference(), &Reference::Rest, "the rest pose when absent");
        assert_eq!(Problem::from_json(&with_reference("\"rest\"")).unwrap().problem.reference(), &Reference::Rest);
        assert_eq!(Problem::from_json(&with_reference("\"least_motion\"")).unwrap().problem.reference(), &Reference::LeastMotion);
        let lp = Problem::from_json(&with_reference(r#"{"rotations": [[2,0,0,0], [0.9,0.1,0,0]], "root_translation": [1,2,3]}"#)).unwrap();
        let r = lp.problem.reference().pose().expect("a reference pose");
        assert_eq!(r.rotations[0], DQuat::IDENTITY, "normalised");
        assert!((r.rotations[1].length() - 1.0).abs() < 1e-15);
        assert!(r.rotations[1].angle_between(DQuat::from_xyzw(0.1, 0.0, 0.0, 0.9).normalize()) < 1e-12);
        assert_eq!(r.root_translation, DVec3::new(1.0, 2.0, 3.0));
        // The start pose is not the reference.
        assert_eq!(lp.pose, Pose::rest(2));
        // Round trip through the file type.
        let file = ProblemFile::from_json(&with_reference(r#"{"rotations": [[1,0,0,0], [1,0,0,0]]}"#)).unwrap();
        assert!(matches!(&file.reference, Some(ReferenceFile::Pose(p)) if p.root_translation == [0.0; 3]));
        assert_eq!(ProblemFile::from_json(&file.to_json()).unwrap(), file);
        for kind in ["\"rest\"", "\"least_motion\""] {
            let file = ProblemFile::from_json(&with_reference(kind)).unwrap();
            assert!(file.to_json().contains(&format!("\"reference\": {kind}")), "{}", file.to_json());
            assert_eq!(ProblemFile::from_json(&file.to_json()).unwrap(), file);
        }
    }

    #[test]
    fn bad_references_are_rejected_like_poses() {
        let e = Problem::from_json(&with_reference(r#"{"rotations": [[1,0,0,0]]}"#)).unwrap_err();
        assert!(matches!(&e, Error::ShapeMismatch { expected: 2, got: 1, what } if what.contains("reference")), "{e}");
        let e = Problem::from_json(&with_reference(r#"{"rotations": [[1,0,0,0], [0,0,0,0]]}"#)).unwrap_err();
        assert!(matches!(&e, Error::NonFinite { what } if what.contains("reference") && what.contains("\"b\"")), "{e}");
        let e = Problem::from_json(&with_reference(r#"{"rotations": [[1,0,0,0], [1,0,0,0]], "root_translation": [1e999,0,0]}"#));
        assert!(e.is_err());
        let e = Problem::from_json(&with_reference(r#"{"rotations": [[1,0,0,0], [1,0,0,0]], "extra": 1}"#)).unwrap_err();
        assert!(matches!(&e, Error::Format(m) if m.contains("reference") && m.contains("extra")), "{e}");
        for bad in ["\"none\"", "3", "[1, 0, 0, 0]"] {
            let e = Problem::from_json(&with_reference(bad)).unwrap_err();
            assert!(matches!(&e, Error::Format(m) if m.contains("is not \"rest\", \"least_motion\" or a pose")), "{bad}: {e}");
        }
    }

    #[test]
    fn solution_files_carry_orientation_residuals() {
        let text = CHAIN.replace("\"chain_length\": 2}", "\"chain_length\": 2, \"orientation\": [0.7071067811865476, 0.7071067811865476, 0, 0]}");
        let lp = Problem::from_json(&text).unwrap();
        let sol = lp.method.solver(lp.settings).unwrap().solve(&lp.problem, &lp.pose).unwrap();
        let file = SolutionFile::new(lp.problem.rig(), lp.method, &sol);
        assert_eq!(file.orientation_residuals, sol.orientation_residuals);
        let frames = lp.problem.rig().forward(&sol.pose);
        assert_eq!(file.orientation_residuals[0], lp.problem.goal_errors(0, &frames).1);
        let json = serde_json::to_value(&file).unwrap();
        assert_eq!(json["orientation_residuals"].as_array().unwrap().len(), 1);
        // Files written before the field existed still read.
        let mut old = json.clone();
        old.as_object_mut().unwrap().remove("orientation_residuals");
        let back: SolutionFile = serde_json::from_value(old).unwrap();
        assert!(back.orientation_residuals.is_empty());
    }
}
