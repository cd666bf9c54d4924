//! `sinew.Rig`: a shared, copy-on-write handle to a core [`sinew::Rig`].

use std::sync::{Arc, PoisonError, RwLock};

use glam::{DMat4, DVec3};
use numpy::{PyArray1, PyArray2, PyArray3};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::convert::{BoneSpec, Dim, mat4s_rows, push_wxyz, push_xyz, quats_from_wxyz, read_f64, read_opt_f64, read_opt_vec3, read_quat, read_vec3, to_numpy};
use crate::errors::{NonFiniteError, RigError, ShapeError, guard, guard_core};
use sinew::{ConeLimit, ConeShape, HingeLimit, JointLimit, Pose, Swing, TwistLimit};

/// A skeleton with rest transforms, lengths and joint limits.
///
/// Cheap to pass around: solves take a snapshot (an `Arc`), and limit changes copy the rig only
/// while a snapshot is still in use (copy-on-write).
#[pyclass(module = "sinew._sinew", name = "Rig", frozen)]
#[derive(Debug)]
pub(crate) struct PyRig {
    inner: RwLock<Arc<sinew::Rig>>,
}

impl PyRig {
    pub(crate) fn from_core(rig: sinew::Rig) -> Self {
        Self { inner: RwLock::new(Arc::new(rig)) }
    }

    /// A snapshot of the rig (shares storage; later limit changes do not affect it).
    pub(crate) fn snapshot(&self) -> Arc<sinew::Rig> {
        self.inner.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Applies `change` to one bone's limit; the core validates it (nothing changes on error).
    fn update_limit(&self, bone: &Bound<'_, PyAny>, change: impl FnOnce(JointLimit) -> JointLimit) -> PyResult<()> {
        let spec = BoneSpec::from_py(bone)?;
        guard_core(|| {
            let mut slot = self.inner.write().unwrap_or_else(PoisonError::into_inner);
            let i = spec.resolve(&slot)?;
            let b = slot.bone(i);
            // Validate before copy-on-write so a bad value never clones the rig.
            let limit = change(b.limit).validated(&b.name)?;
            Arc::make_mut(&mut slot).set_limit(i, limit)
        })
    }

    fn resolve(&self, bone: &Bound<'_, PyAny>) -> PyResult<(Arc<sinew::Rig>, usize)> {
        let spec = BoneSpec::from_py(bone)?;
        let rig = self.snapshot();
        let i = guard_core(|| spec.resolve(&rig))?;
        Ok((rig, i))
    }
}

#[pymethods]
impl PyRig {
    #[new]
    fn new(
        py: Python<'_>,
        names: Vec<String>,
        parents: &Bound<'_, PyAny>,
        rest_matrices: &Bound<'_, PyAny>,
        lengths: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        let n = names.len();
        if n == 0 {
            return Err(crate::errors::core_err(sinew::Error::EmptyRig));
        }
        let (parents, _) = read_f64(parents, "parents", &[Dim::Is(n)])?;
        let (mats, _) = read_f64(rest_matrices, "rest_matrices", &[Dim::Is(n), Dim::Is(4), Dim::Is(4)])?;
        let (lengths, _) = read_f64(lengths, "lengths", &[Dim::Is(n)])?;
        let mut parent_idx = Vec::with_capacity(n);
        for (i, &p) in parents.iter().enumerate() {
            if !p.is_finite() || p.fract() != 0.0 {
                return Err(RigError::new_err(format!(
                    "bone \"{}\" (index {i}): parent {p} is not an integer (use -1 for a root)",
                    names[i]
                )));
            }
            parent_idx.push(if p < 0.0 { None } else { Some(p as usize) });
        }
        let rest = mat4s_rows(&mats);
        let rig = py.detach(|| guard_core(|| sinew::Rig::from_matrices(&names, &parent_idx, &rest, &lengths)))?;
        Ok(Self::from_core(rig))
    }

    /// The rig (with limits) of a problem file; its goals, settings and pose are ignored.
    #[staticmethod]
    fn from_json(py: Python<'_>, text: String) -> PyResult<Self> {
        let rig = py.detach(move || {
            guard_core(|| {
                let mut file = sinew::ProblemFile::from_json(&text)?;
                file.goals.clear();
                file.pose = None;
                file.settings = Default::default();
                Ok(file.load()?.problem.rig().clone())
            })
        })?;
        Ok(Self::from_core(rig))
    }

    fn __len__(&self) -> usize {
        self.snapshot().len()
    }

    fn __repr__(&self) -> String {
        let rig = self.snapshot();
        format!("<sinew.Rig with {} bones, root \"{}\">", rig.len(), rig.bone(0).name)
    }

    /// A new handle to a copy of this rig (storage is shared until either changes).
    fn copy(&self) -> Self {
        Self { inner: RwLock::new(self.snapshot()) }
    }

    fn __copy__(&self) -> Self {
        self.copy()
    }

    fn __deepcopy__(&self, _memo: &Bound<'_, PyAny>) -> Self {
        self.copy()
    }

    #[getter]
    fn names(&self) -> Vec<String> {
        self.snapshot().bones().iter().map(|b| b.name.clone()).collect()
    }

    #[getter]
    fn parents(&self) -> Vec<i64> {
        self.snapshot().bones().iter().map(|b| b.parent.map_or(-1, |p| p as i64)).collect()
    }

    #[getter]
    fn lengths<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let rig = self.snapshot();
        let v: Vec<f64> = rig.bones().iter().map(|b| b.length).collect();
        to_numpy(py, v, rig.len())
    }

    /// Armature-space rest matrices (N, 4, 4), rows as Blender's `bone.matrix_local`.
    #[getter]
    fn rest_matrices<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray3<f64>>> {
        let rig = self.snapshot();
        let f = rig.rest_frames();
        let mut v = Vec::with_capacity(rig.len() * 16);
        for i in 0..rig.len() {
            let m = DMat4::from_rotation_translation(f.rotations[i], f.heads[i]);
            v.extend_from_slice(&m.transpose().to_cols_array());
        }
        to_numpy(py, v, (rig.len(), 4, 4))
    }

    fn index(&self, name: &str) -> PyResult<usize> {
        let rig = self.snapshot();
        guard_core(|| BoneSpec::Name(name.to_owned()).resolve(&rig))
    }

    /// Irregular cone on the bone's swing: largest swing about +X, −X, +Z, −Z (radians, (0, π]).
    fn set_cone_limit(&self, bone: &Bound<'_, PyAny>, x_pos: f64, x_neg: f64, z_pos: f64, z_neg: f64) -> PyResult<()> {
        self.update_limit(bone, |l| JointLimit { swing: Swing::Cone(ConeLimit::new(x_pos, x_neg, z_pos, z_neg)), ..l })
    }

    /// The cone Blender builds from `ik_min_x, ik_max_x, ik_min_z, ik_max_z` (radians).
    fn set_cone_limit_blender(&self, bone: &Bound<'_, PyAny>, min_x: f64, max_x: f64, min_z: f64, max_z: f64) -> PyResult<()> {
        // A bound of exactly 0 becomes ConeLimit::ZERO_BOUND in the core.
        let cone = ConeLimit::from_blender(min_x, max_x, min_z, max_z);
        self.update_limit(bone, |l| JointLimit { swing: Swing::Cone(cone), ..l })
    }

    fn set_twist_limit(&self, bone: &Bound<'_, PyAny>, min: f64, max: f64) -> PyResult<()> {
        self.update_limit(bone, |l| JointLimit { twist: Some(TwistLimit { min, max }), ..l })
    }

    fn set_hinge_limit(&self, bone: &Bound<'_, PyAny>, axis: &Bound<'_, PyAny>, min: f64, max: f64) -> PyResult<()> {
        let axis = read_vec3(axis, "hinge axis")?;
        // (A hinge has one degree of freedom: a twist range set before goes.)
        self.update_limit(bone, |l| JointLimit { swing: Swing::Hinge(HingeLimit { axis, min, max }), twist: None, ..l })
    }

    #[pyo3(signature = (bone, locked = true))]
    fn set_locked(&self, bone: &Bound<'_, PyAny>, locked: bool) -> PyResult<()> {
        self.update_limit(bone, |l| JointLimit { locked, ..l })
    }

    #[pyo3(signature = (bone, stiffness, y = None, z = None))]
    fn set_stiffness(&self, bone: &Bound<'_, PyAny>, stiffness: f64, y: Option<f64>, z: Option<f64>) -> PyResult<()> {
        match (y, z) {
            (None, None) => self.update_limit(bone, |l| JointLimit { stiffness, stiffness_axes: None, ..l }),
            (Some(y), Some(z)) => {
                // `stiffness` (the largest) is what FABRIK's own steps use; NaN is left for
                // validation to refuse.
                let largest = if [stiffness, y, z].iter().any(|v| v.is_nan()) { f64::NAN } else { stiffness.max(y).max(z) };
                self.update_limit(bone, |l| JointLimit { stiffness: largest, stiffness_axes: Some([stiffness, y, z]), ..l })
            }
            _ => Err(pyo3::exceptions::PyTypeError::new_err("set_stiffness takes one stiffness (every axis) or x, y and z")),
        }
    }

    /// Moves root bone `bone` (one without a parent) to the armature-space rest `matrix` (4, 4),
    /// carrying its descendants (`sinew::Rig::set_root_rest`); nothing changes on error.
    fn set_root_rest(&self, bone: &Bound<'_, PyAny>, matrix: &Bound<'_, PyAny>) -> PyResult<()> {
        let spec = BoneSpec::from_py(bone)?;
        let (m, _) = read_f64(matrix, "matrix", &[Dim::Is(4), Dim::Is(4)])?;
        let matrix = mat4s_rows(&m)[0];
        guard_core(|| {
            let mut slot = self.inner.write().unwrap_or_else(PoisonError::into_inner);
            let i = spec.resolve(&slot)?;
            // (Checked on a copy first, so that a bad matrix never clones the rig's storage.)
            let mut moved = (**slot).clone();
            moved.set_root_rest(i, &matrix)?;
            *slot = Arc::new(moved);
            Ok(())
        })
    }

    /// How readily the bone changes length, in [0, 1] (Blender's `ik_stretch`; 0 keeps it rigid).
    fn set_stretch(&self, bone: &Bound<'_, PyAny>, stretch: f64) -> PyResult<()> {
        self.update_limit(bone, |l| JointLimit { stretch, ..l })
    }

    fn clear_limits(&self, bone: &Bound<'_, PyAny>) -> PyResult<()> {
        self.update_limit(bone, |_| JointLimit::FREE)
    }

    /// The bone's limits as a dict.
    fn limit<'py>(&self, py: Python<'py>, bone: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
        let (rig, i) = self.resolve(bone)?;
        let l = rig.bone(i).limit;
        let d = PyDict::new(py);
        let none = py.None();
        let (swing, cone, hinge): (&str, Py<PyAny>, Py<PyAny>) = match l.swing {
            Swing::Free => ("free", none.clone_ref(py), none.clone_ref(py)),
            Swing::Cone(c) => ("cone", (c.x_pos, c.x_neg, c.z_pos, c.z_neg).into_pyobject(py)?.into_any().unbind(), none.clone_ref(py)),
            Swing::Hinge(h) => (
                "hinge",
                none.clone_ref(py),
                ((h.axis.x, h.axis.y, h.axis.z), h.min, h.max).into_pyobject(py)?.into_any().unbind(),
            ),
        };
        d.set_item("swing", swing)?;
        d.set_item("cone", cone)?;
        d.set_item(
            "cone_shape",
            match l.swing {
                Swing::Cone(c) if c.shape == ConeShape::Blender => Some("blender"),
                Swing::Cone(_) => Some("rotation_vector"),
                _ => None,
            },
        )?;
        d.set_item("twist", l.twist.map(|t| (t.min, t.max)))?;
        d.set_item("hinge", hinge)?;
        d.set_item("locked", l.locked)?;
        d.set_item("stiffness", l.max_stiffness())?;
        let [sx, sy, sz] = l.axis_stiffness();
        d.set_item("stiffness_axes", (sx, sy, sz))?;
        d.set_item("stretch", l.stretch)?;
        Ok(d)
    }

    /// How far `rotation_wxyz` (a local rotation) is outside the bone's limit, radians (0 inside).
    fn limit_violation(&self, bone: &Bound<'_, PyAny>, rotation_wxyz: &Bound<'_, PyAny>) -> PyResult<f64> {
        let (rig, i) = self.resolve(bone)?;
        let q = read_quat(rotation_wxyz, "rotation_wxyz")?;
        if !q.is_finite() || q.length() < 1e-9 {
            return Err(NonFiniteError::new_err("rotation_wxyz must be a finite, non-zero quaternion"));
        }
        guard(|| Ok(rig.bone(i).limit.violation(q.normalize())))
    }

    /// Where the bone's cone lets it point (`ConeLimit::boundary_directions`): unit directions
    /// (rings, segments, 3) in the bone's rest frame, the last ring on the boundary; None when
    /// the bone's swing is not bounded by a cone.
    #[pyo3(signature = (bone, segments = 64, rings = 1))]
    fn cone_boundary<'py>(
        &self,
        py: Python<'py>,
        bone: &Bound<'py, PyAny>,
        segments: usize,
        rings: usize,
    ) -> PyResult<Option<Bound<'py, PyArray3<f64>>>> {
        if !(4..=65_536).contains(&segments) || !(1..=4_096).contains(&rings) || segments * rings > 1 << 20 {
            return Err(ShapeError::new_err(format!(
                "cone_boundary: segments must be in [4, 65536] and rings in [1, 4096] (at most 2^20 directions), \
                 got {segments} and {rings}"
            )));
        }
        let (rig, i) = self.resolve(bone)?;
        let Swing::Cone(cone) = rig.bone(i).limit.swing else { return Ok(None) };
        let dirs = guard(|| Ok(cone.boundary_directions(segments, rings)))?;
        let mut v = Vec::with_capacity(dirs.len() * 3);
        for d in dirs {
            push_xyz(&mut v, d);
        }
        to_numpy(py, v, (rings, segments, 3)).map(Some)
    }

    /// Where `rotation_wxyz` (a local rotation) stands against the bone's limit
    /// (`JointLimit::state`): its swing (wxyz), twist angle, hinge angle (None unless a hinge), and
    /// whether the swing and the twist are at a bound to within `tolerance` radians.
    #[pyo3(signature = (bone, rotation_wxyz, tolerance = 1e-3))]
    fn limit_state<'py>(
        &self,
        py: Python<'py>,
        bone: &Bound<'py, PyAny>,
        rotation_wxyz: &Bound<'py, PyAny>,
        tolerance: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let (rig, i) = self.resolve(bone)?;
        let q = read_quat(rotation_wxyz, "rotation_wxyz")?;
        if !q.is_finite() || q.length() < 1e-9 {
            return Err(NonFiniteError::new_err("rotation_wxyz must be a finite, non-zero quaternion"));
        }
        if !(tolerance.is_finite() && tolerance >= 0.0) {
            return Err(NonFiniteError::new_err("tolerance must be a finite number >= 0"));
        }
        let st = guard(|| Ok(rig.bone(i).limit.state(q.normalize(), tolerance)))?;
        let d = PyDict::new(py);
        d.set_item("swing", (st.swing.w, st.swing.x, st.swing.y, st.swing.z))?;
        d.set_item("twist", st.twist)?;
        d.set_item("hinge", st.hinge_angle)?;
        d.set_item("swing_at_bound", st.swing_at_bound)?;
        d.set_item("twist_at_bound", st.twist_at_bound)?;
        Ok(d)
    }

    /// Heads (N, 3), tails (N, 3) and world rotations (N, 4) wxyz, rig space, for local rotations
    /// (N, 4) wxyz (rest pose if None), the root's translation and length scales (N,) (1 if None).
    #[pyo3(signature = (rotations = None, root_translation = None, scales = None))]
    fn forward_kinematics<'py>(
        &self,
        py: Python<'py>,
        rotations: Option<&Bound<'py, PyAny>>,
        root_translation: Option<&Bound<'py, PyAny>>,
        scales: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let rig = self.snapshot();
        let n = rig.len();
        let mut pose = Pose::rest(n);
        if let Some(r) = rotations.filter(|r| !r.is_none()) {
            pose.rotations = quats_from_wxyz(&read_f64(r, "rotations", &[Dim::Is(n), Dim::Is(4)])?.0);
        }
        pose.root_translation = read_opt_vec3(root_translation, "root_translation")?.unwrap_or(DVec3::ZERO);
        pose.scales = read_opt_f64(scales, "scales", &[Dim::Is(n)])?.unwrap_or_default();
        let frames = py.detach(move || {
            guard_core(|| {
                // The core's own pose check (finite, non-zero quaternions), then FK.
                let problem = sinew::Problem::new((*rig).clone(), Vec::new(), sinew::RootMode::Pinned)?;
                let pose = problem.checked_pose(&pose)?;
                Ok(rig.forward(&pose))
            })
        })?;
        let (mut heads, mut tails, mut rots) = (Vec::with_capacity(n * 3), Vec::with_capacity(n * 3), Vec::with_capacity(n * 4));
        for i in 0..n {
            push_xyz(&mut heads, frames.heads[i]);
            push_xyz(&mut tails, frames.tails[i]);
            push_wxyz(&mut rots, frames.rotations[i]);
        }
        let heads: Bound<'py, PyArray2<f64>> = to_numpy(py, heads, (n, 3))?;
        let tails: Bound<'py, PyArray2<f64>> = to_numpy(py, tails, (n, 3))?;
        let rots: Bound<'py, PyArray2<f64>> = to_numpy(py, rots, (n, 4))?;
        PyTuple::new(py, [heads.into_any(), tails.into_any(), rots.into_any()])
    }
}
