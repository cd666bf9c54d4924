//! `sinew.Goal`: one IK goal, with its bone named by index or name (resolved when solving).

use glam::{DQuat, DVec3};
use pyo3::prelude::*;

use crate::convert::{BoneSpec, read_i64, read_opt_quat, read_opt_vec3, read_quat, read_vec3};
use crate::errors::GoalError;

/// One IK goal. Targets, orientations and poles are rig (armature) space; quaternions `(w, x, y, z)`.
#[pyclass(module = "sinew._sinew", name = "Goal")]
#[derive(Debug, Clone)]
pub(crate) struct PyGoal {
    pub(crate) bone: BoneSpec,
    pub(crate) target: DVec3,
    pub(crate) orientation: Option<DQuat>,
    pub(crate) weight: f64,
    pub(crate) chain_length: usize,
    pub(crate) pole_target: Option<DVec3>,
    pub(crate) pole_angle: f64,
    pub(crate) use_tail: bool,
    pub(crate) kind: sinew::GoalKind,
}

fn chain_length_from(obj: &Bound<'_, PyAny>) -> PyResult<usize> {
    let n = read_i64(obj, "chain_length", |m| GoalError::new_err(format!("{m} (0 = up to the root)")))?;
    usize::try_from(n).map_err(|_| GoalError::new_err(format!("chain_length {n} must be >= 0 (0 = up to the root)")))
}

impl PyGoal {
    /// The core goal, resolving the bone against `rig`; `index` is the goal's position (for
    /// messages).
    pub(crate) fn to_core(&self, rig: &sinew::Rig, index: usize) -> sinew::Result<sinew::Goal> {
        // Worded as the core words an unknown effector in a problem file.
        let bone = self.bone.resolve(rig).map_err(|e| match e {
            sinew::Error::UnknownBone { bone } => sinew::Error::UnknownBone { bone: format!("{bone} (effector of goal {index})") },
            other => other,
        })?;
        Ok(sinew::Goal {
            bone,
            target: self.target,
            orientation: self.orientation,
            weight: self.weight,
            chain_length: self.chain_length,
            pole: self.pole_target.map(|target| sinew::Pole { target, angle: self.pole_angle }),
            use_tail: self.use_tail,
            kind: self.kind,
        })
    }

    /// A goal as a problem file gives it (bone by name).
    pub(crate) fn from_core(g: &sinew::Goal, rig: &sinew::Rig) -> Self {
        Self {
            bone: BoneSpec::Name(rig.bone(g.bone).name.clone()),
            target: g.target,
            orientation: g.orientation,
            weight: g.weight,
            chain_length: g.chain_length,
            pole_target: g.pole.map(|p| p.target),
            pole_angle: g.pole.map_or(0.0, |p| p.angle),
            use_tail: g.use_tail,
            kind: g.kind,
        }
    }
}

/// Several goals resolved against one rig.
pub(crate) fn core_goals(goals: &[PyGoal], rig: &sinew::Rig) -> sinew::Result<Vec<sinew::Goal>> {
    goals.iter().enumerate().map(|(i, g)| g.to_core(rig, i)).collect()
}

fn wxyz(q: DQuat) -> (f64, f64, f64, f64) {
    (q.w, q.x, q.y, q.z)
}

fn xyz(v: DVec3) -> (f64, f64, f64) {
    (v.x, v.y, v.z)
}

#[pymethods]
impl PyGoal {
    #[new]
    // `chain_length` is read by `chain_length_from` (a SinewError for an int beyond i64, not
    // pyo3's OverflowError); the signature shown keeps its default of 0.
    #[pyo3(
        signature = (bone, target, orientation = None, weight = 1.0, chain_length = None, pole_target = None, pole_angle = 0.0, use_tail = true, kind = "position", axis = None, direction = None, normal = None),
        text_signature = "(bone, target, orientation=None, weight=1.0, chain_length=0, pole_target=None, pole_angle=0.0, use_tail=True, kind='position', axis=None, direction=None, normal=None)"
    )]
    #[allow(clippy::too_many_arguments)]
    fn new(
        bone: &Bound<'_, PyAny>,
        target: &Bound<'_, PyAny>,
        orientation: Option<&Bound<'_, PyAny>>,
        weight: f64,
        chain_length: Option<&Bound<'_, PyAny>>,
        pole_target: Option<&Bound<'_, PyAny>>,
        pole_angle: f64,
        use_tail: bool,
        kind: &str,
        axis: Option<&Bound<'_, PyAny>>,
        direction: Option<&Bound<'_, PyAny>>,
        normal: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let kind = sinew::GoalKind::from_fields(kind, read_opt_vec3(axis, "axis")?, read_opt_vec3(direction, "direction")?, read_opt_vec3(normal, "normal")?)
            .map_err(GoalError::new_err)?;
        Ok(Self {
            bone: BoneSpec::from_py(bone)?,
            target: read_vec3(target, "target")?,
            orientation: read_opt_quat(orientation, "orientation")?,
            weight,
            chain_length: match chain_length {
                Some(c) if !c.is_none() => chain_length_from(c)?,
                _ => 0,
            },
            pole_target: read_opt_vec3(pole_target, "pole_target")?,
            pole_angle,
            use_tail,
            kind,
        })
    }

    fn __repr__(&self) -> String {
        let bone = match &self.bone {
            BoneSpec::Index(i) => i.to_string(),
            BoneSpec::Name(n) => format!("{n:?}"),
        };
        let t = self.target;
        let kind = match self.kind.vector() {
            Some(v) => format!(", kind={:?}, {}=({}, {}, {})", self.kind.name(), self.vector_name(), v.x, v.y, v.z),
            None if self.kind != sinew::GoalKind::Position => format!(", kind={:?}", self.kind.name()),
            None => String::new(),
        };
        format!("Goal({bone}, target=({}, {}, {}), weight={}, chain_length={}{kind})", t.x, t.y, t.z, self.weight, self.chain_length)
    }

    /// A copy of this goal.
    fn copy(&self) -> Self {
        self.clone()
    }

    fn __copy__(&self) -> Self {
        self.clone()
    }

    fn __deepcopy__(&self, _memo: &Bound<'_, PyAny>) -> Self {
        self.clone()
    }

    #[getter]
    fn get_bone(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.bone.to_py(py)
    }

    #[setter]
    fn set_bone(&mut self, bone: &Bound<'_, PyAny>) -> PyResult<()> {
        self.bone = BoneSpec::from_py(bone)?;
        Ok(())
    }

    #[getter]
    fn get_target(&self) -> (f64, f64, f64) {
        xyz(self.target)
    }

    #[setter]
    fn set_target(&mut self, target: &Bound<'_, PyAny>) -> PyResult<()> {
        self.target = read_vec3(target, "target")?;
        Ok(())
    }

    #[getter]
    fn get_orientation(&self) -> Option<(f64, f64, f64, f64)> {
        self.orientation.map(wxyz)
    }

    #[setter]
    fn set_orientation(&mut self, orientation: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        self.orientation = read_opt_quat(orientation, "orientation")?;
        Ok(())
    }

    #[getter]
    fn get_weight(&self) -> f64 {
        self.weight
    }

    #[setter]
    fn set_weight(&mut self, weight: f64) {
        self.weight = weight;
    }

    #[getter]
    fn get_chain_length(&self) -> usize {
        self.chain_length
    }

    #[setter]
    fn set_chain_length(&mut self, chain_length: &Bound<'_, PyAny>) -> PyResult<()> {
        self.chain_length = chain_length_from(chain_length)?;
        Ok(())
    }

    #[getter]
    fn get_pole_target(&self) -> Option<(f64, f64, f64)> {
        self.pole_target.map(xyz)
    }

    #[setter]
    fn set_pole_target(&mut self, pole_target: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        self.pole_target = read_opt_vec3(pole_target, "pole_target")?;
        Ok(())
    }

    #[getter]
    fn get_pole_angle(&self) -> f64 {
        self.pole_angle
    }

    #[setter]
    fn set_pole_angle(&mut self, pole_angle: f64) {
        self.pole_angle = pole_angle;
    }

    #[getter]
    fn get_use_tail(&self) -> bool {
        self.use_tail
    }

    #[setter]
    fn set_use_tail(&mut self, use_tail: bool) {
        self.use_tail = use_tail;
    }

    /// How far this goal is from met, ``(distance, angle)``, when its bone's frame is
    /// ``rotation`` (w, x, y, z) at ``head`` with its effector point at ``effector`` (rig space):
    /// the engine's own measure of a solution's residuals, for a pose the caller has (Blender's
    /// evaluated pose, say).
    fn errors(&self, head: &Bound<'_, PyAny>, rotation: &Bound<'_, PyAny>, effector: &Bound<'_, PyAny>) -> PyResult<(f64, f64)> {
        let (head, rotation, effector) = (read_vec3(head, "head")?, read_quat(rotation, "rotation")?, read_vec3(effector, "effector")?);
        if let Some(v) = self.kind.vector()
            && !(v.is_finite() && v.normalize_or_zero() != DVec3::ZERO)
        {
            return Err(GoalError::new_err(format!("{} goal: its vector {v} must be finite and nonzero", self.kind.name())));
        }
        let goal = sinew::Goal {
            bone: 0,
            target: self.target,
            orientation: self.orientation.map(|q| q.normalize()),
            weight: self.weight,
            chain_length: self.chain_length,
            pole: None,
            use_tail: self.use_tail,
            kind: self.kind.normalized(),
        };
        Ok(goal.errors(rotation.normalize(), head, effector))
    }

    /// The goal's kind: "position", "orientation", "aim", "line", "plane" or "half_space".
    #[getter]
    fn get_kind(&self) -> &'static str {
        self.kind.name()
    }

    /// The aim goal's bone axis (None for other kinds).
    #[getter]
    fn get_axis(&self) -> Option<(f64, f64, f64)> {
        matches!(self.kind, sinew::GoalKind::Aim { .. }).then(|| self.kind.vector().map(xyz)).flatten()
    }

    /// The line goal's direction (None for other kinds).
    #[getter]
    fn get_direction(&self) -> Option<(f64, f64, f64)> {
        matches!(self.kind, sinew::GoalKind::Line { .. }).then(|| self.kind.vector().map(xyz)).flatten()
    }

    /// The plane or half-space goal's normal (None for other kinds).
    #[getter]
    fn get_normal(&self) -> Option<(f64, f64, f64)> {
        matches!(self.kind, sinew::GoalKind::Plane { .. } | sinew::GoalKind::HalfSpace { .. }).then(|| self.kind.vector().map(xyz)).flatten()
    }
}

impl PyGoal {
    /// The name of the kind's vector field (for `__repr__`).
    fn vector_name(&self) -> &'static str {
        match self.kind {
            sinew::GoalKind::Aim { .. } => "axis",
            sinew::GoalKind::Line { .. } => "direction",
            _ => "normal",
        }
    }
}
