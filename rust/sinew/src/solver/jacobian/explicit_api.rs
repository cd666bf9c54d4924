//! [`DlsSteps`] one call at a time, for the methods that take `J` written out and choose their own
//! steps (`crate::solver::explicit`, and `crate::solver::nlp`'s quasi-Newton steps).

use glam::DVec3;

use super::{DlsSteps, evaluate};
use crate::pose::Pose;
use crate::problem::Problem;

/// The Jacobian written out, for the methods that factor it (the transpose, pseudo-inverse, SVD-DLS
/// and SDLS solvers, `crate::solver::explicit`): the same unknowns, rows, limits and clamping loop
/// as the damped-least-squares steps of the parent module, with `J` formed densely and each step
/// given as `Δθ = Jᵀ y` (every method of the family steps within `J`'s row space, so a step is its
/// `y`).
impl DlsSteps {
    /// Sets the steps up for `problem` at `pose` (inside every limit) with no reference: swinging
    /// bones keep `pose`'s twist. Returns the number of residual rows `m`.
    pub(in crate::solver) fn start_explicit(&mut self, problem: &Problem, pose: &mut Pose) -> usize {
        self.drop_reference();
        self.begin(problem, pose, None).0
    }

    /// `J` at the current pose, column-major `m × n` into `jac`, and returns `n`, the number of
    /// unknowns (each bone's axes in joint order, then one per stretchy bone's length, then the
    /// root's three translations when it is free: [`DlsSteps::translates_root`]). Row `i` is the
    /// derivative of residual row `i` ([`DlsSteps::residual_rows`], target minus effector) along
    /// each unknown, negated: a step `Δθ` moves the residual by `−J Δθ` to first order. Column `c`
    /// of a bone is `a_c × lever` on a goal's position rows and `spin · a_c` on its orientation
    /// rows (thesis eq. A-16; the levers carry the gain and `√weight`); a length's column is its
    /// lever on the position rows of the goals it carries (its unknown is radian-like: the
    /// length's change over its IK tree's extent, over its gain).
    pub(in crate::solver) fn dense_jacobian(&mut self, problem: &Problem, jac: &mut Vec<f64>) -> usize {
        self.linearize(problem);
        let m = self.residual.len();
        let n: usize = self.joints.iter().map(|j| j.count).sum();
        jac.clear();
        jac.resize(m * n, 0.0);
        let mut col = 0;
        for (j, joint) in self.joints.iter().enumerate() {
            let links = &self.links[self.reach_start[j]..self.reach_start[j + 1]];
            let poles = &self.pole_links[self.pole_start[j]..self.pole_start[j + 1]];
            for c in 0..joint.count {
                let column = &mut jac[(col + c) * m..(col + c + 1) * m];
                for l in links {
                    let (position, rotation) = match joint.bone {
                        // The root's translation moves a goal's position rows along each axis.
                        None => (DVec3::AXES[c] * l.lever.x, None),
                        // A length moves them along its lever, and no orientation.
                        Some(_) if joint.stretch.is_some() => (l.lever, None),
                        Some(_) => (joint.axes[c].cross(l.lever), l.spin.map(|s| joint.axes[c] * s)),
                    };
                    column[l.row..l.row + 3].copy_from_slice(&position.to_array());
                    if let Some(r) = rotation {
                        column[l.row + 3..l.row + 6].copy_from_slice(&r.to_array());
                    }
                }
                for p in poles {
                    column[p.row] = p.per_axis[c];
                }
            }
            col += joint.count;
        }
        n
    }

    /// The residual rows at the current pose: per goal `√weight · (target − effector)`, then
    /// its orientation's three rows if it has one; then one row per pole kept in a tree.
    pub(in crate::solver) fn residual_rows(&self) -> &[f64] {
        &self.residual
    }

    /// Whether the last three unknowns are the root's translation (in rig units; every other
    /// unknown is a turn in radians, or a stretchy bone's radian-like length).
    pub(in crate::solver) fn translates_root(&self) -> bool {
        self.joints.last().is_some_and(|j| j.bone.is_none())
    }

    /// Tries the step `Δθ = Jᵀ y` from `pose` (whose frames and residual are the current ones):
    /// each bone turned and clamped to its limit as every step is (the clamp's direction blocked
    /// for the next steps). Returns the trial's `|r|²` and the largest change of a residual row;
    /// [`DlsSteps::accept_trial`] moves `pose` there.
    pub(in crate::solver) fn try_step(&mut self, problem: &Problem, pose: &Pose, y: &[f64]) -> (f64, f64) {
        self.rhs.copy_from_slice(y);
        self.try_step_from(problem, pose, None)
    }

    /// [`DlsSteps::try_step`] with the step given as the unknowns' changes `Δθ` (`n` entries,
    /// in the order of [`DlsSteps::dense_jacobian`]'s columns), for a method whose step is not
    /// in `J`'s row space (the quasi-Newton steps of `nlp`).
    pub(in crate::solver) fn try_step_unknowns(&mut self, problem: &Problem, pose: &Pose, dtheta: &[f64]) -> (f64, f64) {
        self.try_step_from(problem, pose, Some(dtheta))
    }

    /// The trial of [`DlsSteps::try_step`] (`unknowns` `None`: `Δθ = Jᵀ self.rhs`) or of
    /// [`DlsSteps::try_step_unknowns`].
    fn try_step_from(&mut self, problem: &Problem, pose: &Pose, unknowns: Option<&[f64]>) -> (f64, f64) {
        let mut trial = std::mem::take(&mut self.trial);
        trial.clone_from(pose);
        self.apply_step_from(problem, pose, &mut trial, 0.0, false, unknowns);
        let error = evaluate(problem, &self.tree_poles, &trial, &mut self.trial_frames, &mut self.trial_residual);
        self.trial = trial;
        let moved = self.residual.iter().zip(&self.trial_residual).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        (error, moved)
    }

    /// Whether the last step tried had some bone clamped to its limit.
    pub(in crate::solver) fn last_step_clamped(&self) -> bool {
        self.last_step_clamped
    }

    /// `pose` becomes the last [`DlsSteps::try_step`]'s trial, with its frames and residual.
    pub(in crate::solver) fn accept_trial(&mut self, pose: &mut Pose) {
        std::mem::swap(pose, &mut self.trial);
        std::mem::swap(&mut self.frames, &mut self.trial_frames);
        std::mem::swap(&mut self.residual, &mut self.trial_residual);
    }

    /// Every goal of the current pose within `tolerance` (and every tree pole kept).
    pub(in crate::solver) fn reached(&self, problem: &Problem, tolerance: f64) -> bool {
        self.all_reached(problem, tolerance)
    }
}
