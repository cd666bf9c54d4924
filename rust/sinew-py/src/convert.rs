//! numpy and Python values to owned core values and back. Nothing here does IK math: only shape
//! checks, dtype conversion (float32 and integer inputs are converted to float64) and copies.

use glam::{DMat4, DQuat, DVec3};
use numpy::ndarray::{Array, Dimension, IntoDimension};
use numpy::{AllowTypeChange, IntoPyArray, PyArray, PyArrayLikeDyn};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::errors::{InternalError, SettingsError, ShapeError, UnknownBoneError};

/// One expected array dimension: a known size, or any size (named for the message).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Dim {
    /// Exactly this many.
    Is(usize),
    /// Any number, shown by this name.
    Any(&'static str),
}

fn shape_text(dims: &[Dim]) -> String {
    let parts: Vec<String> = dims
        .iter()
        .map(|d| match d {
            Dim::Is(n) => n.to_string(),
            Dim::Any(name) => (*name).to_owned(),
        })
        .collect();
    if parts.len() == 1 { format!("({},)", parts[0]) } else { format!("({})", parts.join(", ")) }
}

/// Copies an array-like of any numeric dtype into row-major `f64`s, checking its shape.
/// Returns the values and the actual shape.
///
/// # Errors
/// `ShapeError` naming `what` and the expected shape.
pub(crate) fn read_f64(obj: &Bound<'_, PyAny>, what: &str, dims: &[Dim]) -> PyResult<(Vec<f64>, Vec<usize>)> {
    let expected = shape_text(dims);
    let arr: PyArrayLikeDyn<'_, f64, AllowTypeChange> = obj
        .extract()
        .map_err(|e| ShapeError::new_err(format!("{what}: expected a numeric array of shape {expected} ({e})")))?;
    let view = arr.as_array();
    let got = view.shape();
    let fits = got.len() == dims.len()
        && got.iter().zip(dims).all(|(&g, d)| match d {
            Dim::Is(n) => g == *n,
            Dim::Any(_) => true,
        });
    if !fits {
        let got_text = if got.len() == 1 {
            format!("({},)", got[0])
        } else {
            format!("({})", got.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))
        };
        return Err(ShapeError::new_err(format!("{what}: expected an array of shape {expected}, got shape {got_text}")));
    }
    Ok((view.iter().copied().collect(), got.to_vec()))
}

/// An optional array argument: `None` stays `None`.
pub(crate) fn read_opt_f64(obj: Option<&Bound<'_, PyAny>>, what: &str, dims: &[Dim]) -> PyResult<Option<Vec<f64>>> {
    match obj {
        Some(o) if !o.is_none() => Ok(Some(read_f64(o, what, dims)?.0)),
        _ => Ok(None),
    }
}

/// A 3-vector argument (any sequence or array of 3 numbers).
pub(crate) fn read_vec3(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<DVec3> {
    let (v, _) = read_f64(obj, what, &[Dim::Is(3)])?;
    Ok(DVec3::new(v[0], v[1], v[2]))
}

/// An optional 3-vector (`None` → `None`).
pub(crate) fn read_opt_vec3(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<DVec3>> {
    match obj {
        Some(o) if !o.is_none() => read_vec3(o, what).map(Some),
        _ => Ok(None),
    }
}

/// A quaternion argument given as `(w, x, y, z)`.
pub(crate) fn read_quat(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<DQuat> {
    let (v, _) = read_f64(obj, what, &[Dim::Is(4)])?;
    Ok(quat_from_wxyz(&v))
}

/// An optional `(w, x, y, z)` quaternion (`None` → `None`).
pub(crate) fn read_opt_quat(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<DQuat>> {
    match obj {
        Some(o) if !o.is_none() => read_quat(o, what).map(Some),
        _ => Ok(None),
    }
}

/// `[w, x, y, z]` (at least four values) to a quaternion, scaled exactly (by a power of two)
/// when its components are so large that normalising it would overflow
/// (`sinew::problem::rescaled_quat`; other quaternions are kept bit for bit).
pub(crate) fn quat_from_wxyz(v: &[f64]) -> DQuat {
    sinew::problem::rescaled_quat(DQuat::from_xyzw(v[1], v[2], v[3], v[0]))
}

/// A Python `int` argument as `i64`. An int too large for it raises `make_err` (a `SinewError`
/// subclass naming `what`), not pyo3's `OverflowError`; other types keep pyo3's `TypeError`.
pub(crate) fn read_i64(obj: &Bound<'_, PyAny>, what: &str, make_err: fn(String) -> PyErr) -> PyResult<i64> {
    match obj.extract::<i64>() {
        Ok(v) => Ok(v),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(obj.py()) => {
            let shown = obj.str().map(|s| s.to_string()).unwrap_or_else(|_| "?".into());
            Err(make_err(format!("{what} = {shown} is out of range")))
        }
        Err(e) => Err(e),
    }
}

/// Row-major `(n, 4)` wxyz values to quaternions.
pub(crate) fn quats_from_wxyz(v: &[f64]) -> Vec<DQuat> {
    v.chunks_exact(4).map(quat_from_wxyz).collect()
}

/// Row-major `(n, 3)` values to vectors.
pub(crate) fn vec3s(v: &[f64]) -> Vec<DVec3> {
    v.chunks_exact(3).map(|c| DVec3::new(c[0], c[1], c[2])).collect()
}

/// Row-major `(n, 4, 4)` matrices (rows as numpy gives a Blender `Matrix`) to glam's
/// column-major ones.
pub(crate) fn mat4s_rows(v: &[f64]) -> Vec<DMat4> {
    v.chunks_exact(16).map(|m| DMat4::from_cols_slice(m).transpose()).collect()
}

/// Appends `q` as `w, x, y, z`.
pub(crate) fn push_wxyz(out: &mut Vec<f64>, q: DQuat) {
    out.extend_from_slice(&[q.w, q.x, q.y, q.z]);
}

/// `rotations` as `w, x, y, z` each, one after another (an `(N, 4)` array's data).
pub(crate) fn wxyz_flat(rotations: &[DQuat]) -> Vec<f64> {
    let mut out = Vec::with_capacity(4 * rotations.len());
    for &q in rotations {
        push_wxyz(&mut out, q);
    }
    out
}

/// Appends `v` as `x, y, z`.
pub(crate) fn push_xyz(out: &mut Vec<f64>, v: DVec3) {
    out.extend_from_slice(&[v.x, v.y, v.z]);
}

/// Moves `data` into a new numpy array of `shape` (no copy).
pub(crate) fn to_numpy<'py, T, Sh>(py: Python<'py>, data: Vec<T>, shape: Sh) -> PyResult<Bound<'py, PyArray<T, Sh::Dim>>>
where
    T: numpy::Element,
    Sh: IntoDimension,
    Sh::Dim: Dimension,
{
    let a = Array::from_shape_vec(shape.into_dimension(), data)
        .map_err(|e| InternalError::new_err(format!("internal error in Sinew: output shape ({e})")))?;
    Ok(a.into_pyarray(py))
}

/// Moves `data` into a new numpy array of `shape`, unbound (for storing in a class).
pub(crate) fn to_numpy_py<T, Sh>(py: Python<'_>, data: Vec<T>, shape: Sh) -> PyResult<Py<PyArray<T, Sh::Dim>>>
where
    T: numpy::Element,
    Sh: IntoDimension,
    Sh::Dim: Dimension,
{
    Ok(to_numpy(py, data, shape)?.unbind())
}

/// How a caller names a bone: by index or by name (resolved against a rig later).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BoneSpec {
    /// An index (non-negative).
    Index(usize),
    /// A name.
    Name(String),
}

impl BoneSpec {
    /// Reads an `int` (or anything with `__index__`) or a `str`.
    ///
    /// # Errors
    /// `UnknownBoneError` for a negative index or another type.
    pub(crate) fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        if let Ok(s) = obj.cast::<PyString>() {
            return Ok(Self::Name(s.to_str()?.to_owned()));
        }
        match obj.extract::<i64>() {
            Ok(i) if i >= 0 => Ok(Self::Index(i as usize)),
            Ok(i) => Err(UnknownBoneError::new_err(format!("unknown bone index {i} (indices are non-negative)"))),
            Err(_) => Err(UnknownBoneError::new_err(format!(
                "a bone is named by an int index or a str name, not {}",
                obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "this type".into())
            ))),
        }
    }

    /// The bone's index in `rig`.
    ///
    /// # Errors
    /// The core's `UnknownBone`.
    pub(crate) fn resolve(&self, rig: &sinew::Rig) -> sinew::Result<usize> {
        use sinew::BoneRef;
        match self {
            Self::Index(i) => i.resolve(rig),
            Self::Name(n) => n.as_str().resolve(rig),
        }
    }

    /// Back to Python: an `int` or a `str`.
    pub(crate) fn to_py(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(match self {
            Self::Index(i) => i.into_pyobject(py)?.into_any().unbind(),
            Self::Name(n) => n.into_pyobject(py)?.into_any().unbind(),
        })
    }
}

/// Reads a root mode: `"pinned"` or `"free"`.
pub(crate) fn root_mode(s: &str) -> PyResult<sinew::RootMode> {
    match s.to_ascii_lowercase().as_str() {
        "pinned" => Ok(sinew::RootMode::Pinned),
        "free" => Ok(sinew::RootMode::Free),
        _ => Err(SettingsError::new_err(format!("root mode \"{s}\" is invalid: use \"pinned\" or \"free\""))),
    }
}

/// A root mode's name.
pub(crate) fn root_mode_name(m: sinew::RootMode) -> &'static str {
    match m {
        sinew::RootMode::Pinned => "pinned",
        sinew::RootMode::Free => "free",
    }
}

/// A stop reason's name.
pub(crate) fn stop_name(s: sinew::StopReason) -> &'static str {
    s.name()
}
