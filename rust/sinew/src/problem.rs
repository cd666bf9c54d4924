//! A problem binds a rig to its goals, validates them and derives the chain structure: which
//! bones each goal moves and where chains meet (the sub-bases of FABRIK §3.7.1, found by the
//! "pre-analysis of the body" of its footnote 2).

use std::sync::atomic::{AtomicU64, Ordering};

use glam::{DQuat, DVec3};

use crate::error::{Error, Result};
use crate::goal::{Goal, GoalKind};
use crate::pose::{Frames, MAX_SCALE, MIN_SCALE, Pose};
use crate::rig::Rig;

/// Whether the rig's root bone may translate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RootMode {
    /// The root's head stays where the start pose puts it (default).
    #[default]
    Pinned,
    /// The root may translate (when some goal's chain reaches it).
    Free,
}

/// What the freedom the goals leave falls back to ([`Problem::reference`]).
///
/// Among the poses that meet the goals, `fabrik` and `dls` return the one nearest the reference
/// in a weighted joint-space measure (see [`crate::solver`]'s module docs); the other methods
/// start from it. Issue #13: an animator expects the pose nearest one they know (the rest pose,
/// or in a DCC the keyed pose before IK), not wherever the steps from the last answer stop.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Reference {
    /// The rest pose (the default): identity rotations, unit lengths, and the start's root
    /// translation (a free root is not pulled anywhere).
    #[default]
    Rest,
    /// This pose: its rotations, its lengths where it has them, and its root translation for a
    /// free root. In a DCC, the pose before IK (the keyed animation at the frame being solved).
    Pose(Pose),
    /// No reference: each method's answer is where its steps lead from the start (`fabrik` and
    /// `dls`: near the least joint motion from it, in a few iterations). For tracking where only
    /// speed matters, and to measure the papers' methods as published.
    LeastMotion,
}

impl Reference {
    /// [`Reference::Rest`]'s name, as the problem format and Python give it.
    pub const REST_NAME: &'static str = "rest";
    /// [`Reference::LeastMotion`]'s name, as the problem format and Python give it.
    pub const LEAST_MOTION_NAME: &'static str = "least_motion";

    /// The reference named `name` ([`Reference::REST_NAME`], [`Reference::LEAST_MOTION_NAME`]),
    /// if it is one.
    #[must_use]
    pub fn named(name: &str) -> Option<Self> {
        match name {
            Self::REST_NAME => Some(Self::Rest),
            Self::LEAST_MOTION_NAME => Some(Self::LeastMotion),
            _ => None,
        }
    }

    /// This reference's name; `None` for a pose.
    #[must_use]
    pub fn name(&self) -> Option<&'static str> {
        match self {
            Self::Rest => Some(Self::REST_NAME),
            Self::LeastMotion => Some(Self::LEAST_MOTION_NAME),
            Self::Pose(_) => None,
        }
    }

    /// The reference's pose, where one is given ([`Reference::Pose`]).
    #[must_use]
    pub fn pose(&self) -> Option<&Pose> {
        match self {
            Self::Pose(p) => Some(p),
            _ => None,
        }
    }
}

/// The derived chain structure of a problem: what every method uses. What only FABRIK uses
/// (what pulls each bone, the reaches of lone chains, free tails, the serial chain) is its
/// solvers' plan (`solver/fabrik/plan.rs`), kept between solves by `Problem::structure_id`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Topology {
    /// Per goal: the bones it moves, effector first, then up the chain.
    pub moved: Vec<Vec<usize>>,
    /// Bones where two or more goal chains meet, or where a goal's effector is also on another
    /// goal's chain, ascending.
    pub sub_bases: Vec<usize>,
    /// Every bone some goal moves, ascending (parent before child).
    pub active: Vec<usize>,
    /// Per bone: whether some goal moves it.
    pub(crate) is_active: Vec<bool>,
    /// Per bone: how many goals move it.
    pub(crate) goal_count: Vec<usize>,
    /// Per goal: the reach of its whole chain, from the top bone's head to the effector point.
    pub(crate) chain_reach: Vec<f64>,
    /// Every bone some goal moves whose [`crate::JointLimit::stretch`] is above 0, ascending:
    /// their lengths are unknowns too.
    pub(crate) stretchy: Vec<usize>,
    /// Per bone: the length a stretchy bone's length change is measured against (see
    /// `solver::jacobian`): the summed lengths and offsets of the moved bones connected to it
    /// through moved parents (its IK tree, as Blender's IK scales a tree to unit size); 0 for
    /// other bones.
    pub(crate) stretch_norm: Vec<f64>,
    /// Per goal: a label it shares with exactly the goals it is coupled with, directly or
    /// through others: two goals couple when a bone some goal moves lies on both their paths
    /// to the root (turning it moves both effectors), or through the free root's translation.
    /// The damped-least-squares system is block diagonal over these groups.
    pub(crate) coupled: Vec<usize>,
}

impl Topology {
    fn derive(rig: &Rig, goals: &[Goal]) -> Self {
        let n = rig.len();
        let mut t = Topology { moved: Vec::with_capacity(goals.len()), ..Default::default() };
        let mut is_active = vec![false; n];
        // Per bone: how many of its children some goal's chain leads through (each pulls it in
        // FABRIK's forward stage); `linked`: whether a child is counted (a child has one parent).
        let mut pulled_by = vec![0usize; n];
        let mut linked = vec![false; n];
        for g in goals {
            let mut chain = vec![g.bone];
            let mut b = g.bone;
            while g.chain_length == 0 || chain.len() < g.chain_length {
                match rig.bone(b).parent {
                    Some(p) => {
                        chain.push(p);
                        b = p;
                    }
                    None => break,
                }
            }
            for w in chain.windows(2) {
                let (child, parent) = (w[0], w[1]);
                if !linked[child] {
                    linked[child] = true;
                    pulled_by[parent] += 1;
                }
            }
            for &c in &chain {
                is_active[c] = true;
            }
            t.moved.push(chain);
        }
        t.goal_count = vec![0usize; n];
        for chain in &t.moved {
            for &b in chain {
                t.goal_count[b] += 1;
            }
        }
        for (g, chain) in goals.iter().zip(&t.moved) {
            t.chain_reach.push(chain_reaches(rig, g, chain, |_, _| {}));
        }
        t.active = (0..n).filter(|&i| is_active[i]).collect();
        t.stretchy = t.active.iter().copied().filter(|&i| rig.bone(i).limit.stretch > 0.0).collect();
        t.stretch_norm = vec![0.0; n];
        if !t.stretchy.is_empty() {
            // Each moved bone's tree: the topmost moved bone reached through moved parents; a
            // tree's extent is its bones' lengths plus their heads' offsets from their parents'
            // tails (Blender's `MaxExtension`, the top's offset not counted).
            let mut tree = vec![usize::MAX; n];
            let mut extent = vec![0.0; n];
            for &i in &t.active {
                let b = rig.bone(i);
                match b.parent.filter(|&p| is_active[p]) {
                    Some(p) => {
                        tree[i] = tree[p];
                        extent[tree[i]] += b.length + (b.rest_head - DVec3::new(0.0, rig.bone(p).length, 0.0)).length();
                    }
                    None => {
                        tree[i] = i;
                        extent[i] += b.length;
                    }
                }
            }
            for &i in &t.stretchy {
                t.stretch_norm[i] = extent[tree[i]];
            }
        }
        t.is_active = is_active;
        let mut is_effector = vec![false; n];
        for g in goals {
            is_effector[g.bone] = true;
        }
        t.sub_bases = (0..n).filter(|&i| pulled_by[i] + usize::from(is_effector[i]) >= 2).collect();
        t
    }

    /// Whether goal `gi`'s bones are moved by no other goal (its chain is a tree of its own,
    /// where Blender's IK keeps a pole).
    #[must_use]
    pub fn is_lone_chain(&self, gi: usize) -> bool {
        self.moved[gi].iter().all(|&b| self.goal_count[b] == 1)
    }

    /// The bones of every lone chain (see [`Topology::is_lone_chain`]) with a pole, ascending:
    /// a sequence starts them from its start pose at every frame ([`crate::solve_sequence`]), as
    /// Blender's IK starts every evaluation from the pose before IK.
    #[must_use]
    pub(crate) fn blender_pole_bones(&self, goals: &[Goal]) -> Vec<usize> {
        let mut bones: Vec<usize> = (0..goals.len())
            .filter(|&gi| goals[gi].pole.is_some() && self.is_lone_chain(gi))
            .flat_map(|gi| self.moved[gi].iter().copied())
            .collect();
        bones.sort_unstable();
        bones.dedup();
        bones
    }
}

/// The most goals that may move bones in common (whose chains meet: a bone some goal moves lies
/// on both their paths to the root). The damped-least-squares steps solve a dense system per
/// group of coupled goals, of up to 7 rows per goal (position, orientation, a pole in a tree):
/// `(7·G)²` doubles, 26 MB at this cap (and `(7·G)³ / 3` operations per step), against 400 GB for
/// 100 000 goals sharing a root.
pub const MAX_COUPLED_GOALS: usize = 256;

/// [`Topology::coupled`]: a union–find over the goals, joined at every moved bone on their
/// paths to the root (and at the root when `root_translates`, where the free root's translation
/// moves every goal under bone 0). Time linear in the goals' path lengths.
fn coupled_goals(
    rig: &Rig,
    goals: &[Goal],
    is_active: &[bool],
    root_translates: bool,
) -> Vec<usize> {
    fn find(parent: &mut [usize], mut x: usize) -> usize {
        while parent[x] != x {
            parent[x] = parent[parent[x]];
            x = parent[x];
        }
        x
    }
    let mut parent: Vec<usize> = (0..goals.len()).collect();
    // Per bone: the first goal whose path crosses it (usize::MAX: none yet).
    let mut owner = vec![usize::MAX; rig.len()];
    let root_moves = root_translates && is_active.first() == Some(&true);
    for (gi, g) in goals.iter().enumerate() {
        let mut b = Some(g.bone);
        while let Some(i) = b {
            if is_active[i] || (i == 0 && root_moves) {
                if owner[i] == usize::MAX {
                    owner[i] = gi;
                } else {
                    let (a, o) = (find(&mut parent, gi), find(&mut parent, owner[i]));
                    // Joined at the smaller root: labels are the groups' first goals.
                    parent[a.max(o)] = a.min(o);
                    // The owner's walk went on from here to the root: nothing above is new.
                    break;
                }
            }
            b = rig.bone(i).parent;
        }
    }
    (0..goals.len()).map(|gi| find(&mut parent, gi)).collect()
}

/// The first goal of the largest group in `coupled` and its size (`None` without goals).
fn largest_coupled_group(coupled: &[usize]) -> Option<(usize, usize)> {
    let mut sizes = vec![0usize; coupled.len()];
    for &c in coupled {
        sizes[c] += 1;
    }
    sizes
        .iter()
        .enumerate()
        .max_by_key(|&(i, &s)| (s, std::cmp::Reverse(i)))
        .map(|(i, &s)| (i, s))
}

/// The most goals a problem may have. Time and memory grow linearly with the goals (and their
/// chains' lengths) as long as few of them share moving bones ([`MAX_COUPLED_GOALS`]); this
/// bounds them in all. More goals are refused with [`Error::BadGoal`] naming the first goal
/// beyond the cap.
pub const MAX_GOALS: usize = 1 << 16;

/// The range of a goal's weight. Weights only matter relative to each other, and the solvers
/// multiply and square them, so they are kept within twelve orders of magnitude of 1; others are
/// refused with [`Error::BadGoal`].
pub const WEIGHT_RANGE: std::ops::RangeInclusive<f64> = 1e-12..=1e12;

/// `q` scaled by a power of two so that its largest component lies in [0.5, 1) when some
/// component is so large that `|q|²` would overflow (beyond 1e150); otherwise `q` itself, bit for
/// bit. The scaling is exact, so the rotation is unchanged; the adapters apply it to every
/// quaternion they read before handing it to the core, which then normalises it safely.
#[must_use]
pub fn rescaled_quat(q: DQuat) -> DQuat {
    let m = max_component(q);
    if !(m.is_finite() && m > 1e150) {
        return q;
    }
    // 2^-e with 2^(e-1) <= m < 2^e; m > 1e150 keeps e well inside f64's exponent range.
    // Two factors: 2^-1024 alone would be computed as 1 / 2^1024 = 1 / inf = 0.
    let e = m.log2().floor() as i32 + 1;
    q * 2f64.powi(-(e / 2)) * 2f64.powi(-(e - e / 2))
}

/// The largest magnitude among `q`'s components.
fn max_component(q: DQuat) -> f64 {
    q.to_array().into_iter().fold(0.0f64, |m, c| m.max(c.abs()))
}

/// `q` normalised without overflow (see [`rescaled_quat`]).
fn unit_quat(q: DQuat) -> DQuat {
    rescaled_quat(q).normalize()
}

/// A rig, its goals and the root mode, validated and analysed.
///
/// Targets can be moved cheaply between solves ([`Problem::set_target`]); the topology is derived
/// once.
#[derive(Clone)]
pub struct Problem {
    rig: Rig,
    goals: Vec<Goal>,
    root: RootMode,
    topology: Topology,
    /// What the redundant freedom falls back to (see [`Problem::reference`]).
    reference: Reference,
    /// See [`Problem::structure_id`].
    structure: u64,
}

/// The next [`Problem::structure_id`] (0 is no problem's).
static NEXT_STRUCTURE: AtomicU64 = AtomicU64::new(1);

/// A structure id no problem has had before in this process.
fn next_structure() -> u64 {
    NEXT_STRUCTURE.fetch_add(1, Ordering::Relaxed)
}

/// Rig, goals, root mode, topology and reference; the structure id (a cache key, not part of the
/// value) is not compared.
impl PartialEq for Problem {
    fn eq(&self, other: &Self) -> bool {
        let Self { rig, goals, root, topology, reference, structure: _ } = self;
        *rig == other.rig && *goals == other.goals && *root == other.root && *topology == other.topology && *reference == other.reference
    }
}

/// As derived, without the structure id (a cache key, not part of the value).
impl std::fmt::Debug for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self { rig, goals, root, topology, reference, structure: _ } = self;
        f.debug_struct("Problem")
            .field("rig", rig)
            .field("goals", goals)
            .field("root", root)
            .field("topology", topology)
            .field("reference", reference)
            .finish()
    }
}

impl Problem {
    /// Validates `goals` against `rig` and derives the topology.
    ///
    /// # Errors
    /// [`Error::BadGoal`] for more than [`MAX_GOALS`] goals or [`MAX_COUPLED_GOALS`] goals whose
    /// chains meet, an unknown effector, a non-finite
    /// target, orientation or pole, a target or pole beyond [`crate::rig::MAX_COORDINATE`], or a
    /// weight outside [`WEIGHT_RANGE`].
    pub fn new(rig: Rig, goals: Vec<Goal>, root: RootMode) -> Result<Self> {
        if goals.len() > MAX_GOALS {
            return Err(Error::BadGoal {
                goal: MAX_GOALS,
                reason: format!("a problem has at most {MAX_GOALS} goals; {} were given", goals.len()),
            });
        }
        for (i, g) in goals.iter().enumerate() {
            validate_goal(&rig, i, g)?;
        }
        let goals: Vec<Goal> = goals
            .into_iter()
            .map(|mut g| {
                g.orientation = g.orientation.map(unit_quat);
                g.kind = g.kind.normalized();
                g
            })
            .collect();
        let mut topology = Topology::derive(&rig, &goals);
        topology.coupled = coupled_goals(&rig, &goals, &topology.is_active, root == RootMode::Free);
        if let Some((goal, size)) = largest_coupled_group(&topology.coupled)
            && size > MAX_COUPLED_GOALS
        {
            return Err(Error::BadGoal {
                goal,
                reason: format!(
                    "{size} goals, from goal {goal} on, move bones in common (their chains meet): at most {MAX_COUPLED_GOALS} may; \
                     shorten their chains so that fewer goals share moving bones"
                ),
            });
        }
        Ok(Self { rig, goals, root, topology, reference: Reference::Rest, structure: next_structure() })
    }

    /// The goals in groups that share no moving bone and move no other group's effector
    /// ([`Topology::coupled`]), each group's goals in order, the groups in the order of their
    /// first goals: `None` unless there are two or more (a free root that moves couples them all).
    #[must_use]
    pub(crate) fn independent_groups(&self) -> Option<Vec<Vec<usize>>> {
        let coupled = &self.topology.coupled;
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for (gi, &label) in coupled.iter().enumerate() {
            // (Labels are their groups' first goals.)
            if label == gi {
                groups.push(vec![gi]);
            } else if let Some(group) = groups.iter_mut().find(|g| g[0] == label) {
                group.push(gi);
            }
        }
        (groups.len() > 1).then_some(groups)
    }

    /// The same rig, root mode and reference with only the goals `goals` (indices into
    /// [`Problem::goals`], in that order).
    ///
    /// # Errors
    /// As [`Problem::new`] (not for goals this problem already holds).
    pub(crate) fn with_goals(&self, goals: &[usize]) -> Result<Self> {
        let mut sub = Self::new(self.rig.clone(), goals.iter().map(|&g| self.goals[g]).collect(), self.root)?;
        sub.reference.clone_from(&self.reference);
        Ok(sub)
    }

    /// This problem (made by [`Problem::with_goals`] from `whole`, whose structure has not
    /// changed since) given what may change between solves without changing the structure: the
    /// goals' targets, orientations, kinds and poles, the reference and the roots' rests.
    pub(crate) fn copy_frame_from(&mut self, whole: &Problem, goals: &[usize]) {
        for (mine, &g) in self.goals.iter_mut().zip(goals) {
            *mine = whole.goals[g];
        }
        self.reference.clone_from(&whole.reference);
        self.rig.copy_root_rests_from(&whole.rig);
    }

    /// What the freedom the goals leave falls back to ([`Reference`]; the rest pose unless set).
    /// Among the poses that meet the goals, `fabrik` and `dls` return the one nearest it (see
    /// [`crate::solver`]'s module docs): a spine shares its bend as the reference does, a limb
    /// keeps its bend plane, and no bone twists unless an orientation goal or a pole asks; the
    /// other methods start from it.
    #[must_use]
    pub fn reference(&self) -> &Reference {
        &self.reference
    }

    /// Whether the freedom falls back to a reference: anything but [`Reference::LeastMotion`].
    #[must_use]
    pub fn has_reference(&self) -> bool {
        !matches!(self.reference, Reference::LeastMotion)
    }

    /// Sets the reference (see [`Problem::reference`]). A given pose is checked as a start pose
    /// is and stored with unit quaternions.
    ///
    /// # Errors
    /// The errors of [`Problem::checked_pose`] for a [`Reference::Pose`]; nothing changes on error.
    pub fn set_reference(&mut self, reference: Reference) -> Result<()> {
        self.reference = match reference {
            Reference::Pose(p) => Reference::Pose(self.checked_pose(&p)?),
            other => other,
        };
        Ok(())
    }

    /// The reference's rotations (rest for [`Reference::Rest`] and [`Reference::LeastMotion`]) clamped into every bone's limit,
    /// written into `out`; bones no goal moves, and locked ones, keep `start`'s (they keep their
    /// start in a solve). Its length scales into `scales`: empty for a problem without stretch
    /// whose start has none, else the reference's for the bones whose length is an unknown (1 where it has none) and
    /// `start`'s for the others. Returns the root translation: a given reference pose's for a free
    /// root, else `start`'s.
    pub(crate) fn reference_into(&self, start: &Pose, out: &mut Vec<DQuat>, scales: &mut Vec<f64>) -> DVec3 {
        out.clear();
        match &self.reference {
            Reference::Pose(r) => out.extend_from_slice(&r.rotations),
            Reference::Rest | Reference::LeastMotion => out.resize(self.rig.len(), DQuat::IDENTITY),
        }
        let active = &self.topology.is_active;
        for (i, q) in out.iter_mut().enumerate() {
            let limit = &self.rig.bone(i).limit;
            *q = if active[i] { limit.constrain(start.rotations[i], *q) } else { start.rotations[i] };
        }
        scales.clear();
        if !self.topology.stretchy.is_empty() || !start.scales.is_empty() {
            scales.extend((0..self.rig.len()).map(|i| start.scale(i)));
            for &i in &self.topology.stretchy {
                scales[i] = self.reference.pose().map_or(1.0, |r| r.scale(i));
            }
        }
        match (&self.reference, self.root) {
            (Reference::Pose(r), RootMode::Free) => r.root_translation,
            _ => start.root_translation,
        }
    }

    /// Whether some bone a goal moves may change its length ([`crate::JointLimit::stretch`]
    /// above 0): a solve then returns a length scale per bone ([`Pose::scales`]).
    #[must_use]
    pub fn stretches(&self) -> bool {
        !self.topology.stretchy.is_empty()
    }

    /// Goal `gi`'s errors at the pose whose forward kinematics is `frames`: the distance from its
    /// effector point to its target, and the angle (radians, 0 for a position goal) from the
    /// effector bone's frame to its target orientation. The one place a goal's error is
    /// measured for reporting ([`crate::Solution::residuals`]) and for "reached".
    ///
    /// For a line, plane or half-space goal the distance is to the nearest point of it; an
    /// orientation or aim goal has distance 0 and the angle its bone must still turn
    /// ([`Goal::demand`]).
    #[must_use]
    pub fn goal_errors(&self, gi: usize, frames: &Frames) -> (f64, f64) {
        let g = &self.goals[gi];
        g.errors(frames.rotations[g.bone], frames.heads[g.bone], frames.effector(g.bone, g.use_tail))
    }

    /// Whether every goal is a position goal ([`GoalKind::Position`]), as every method's own
    /// iterations take them; [`crate::solver::Solver::solve`] meets the other kinds through
    /// `Problem::as_position_goals`.
    #[must_use]
    pub fn has_only_position_goals(&self) -> bool {
        self.goals.iter().all(|g| g.kind == GoalKind::Position)
    }

    /// Makes `out` (a clone of this problem, or its last output) the problem whose goals are
    /// position goals asking what this problem's goals ask at the pose whose forward kinematics
    /// is `frames` ([`Goal::demand`]): each goal's target becomes its demanded point, its
    /// orientation the demanded one (so an orientation or aim goal is met to the angle
    /// [`Problem::goal_met`] asks, not only to the distance its point moves by). Rig, limits, root, reference and topology are
    /// this problem's (no goal kind changes which bones a goal moves).
    pub(crate) fn as_position_goals(&self, frames: &Frames, out: &mut Problem) {
        // (So its structure id is this problem's too: the goals keep their bones, chains,
        // weights, effector points and poles.)
        debug_assert_eq!(out.structure, self.structure, "`out` is a clone of this problem");
        for (g, o) in self.goals.iter().zip(out.goals.iter_mut()) {
            let rotation = frames.rotations[g.bone];
            let demand = g.demand(rotation, frames.heads[g.bone], frames.effector(g.bone, g.use_tail));
            *o = Goal { kind: GoalKind::Position, target: demand.point, orientation: demand.orientation, ..*g };
        }
    }

    /// Whether goal `gi` is met within `tolerance` at the pose whose forward kinematics is
    /// `frames`: its distance within `tolerance`, and its orientation error within
    /// `tolerance / reach` radians (`reach` its chain's length from the top bone's head, at least
    /// the effector bone's length: a radian counts as far as the chain reaches, as in the
    /// least-squares steps' residual).
    #[must_use]
    pub fn goal_met(&self, gi: usize, frames: &Frames, tolerance: f64) -> bool {
        let (distance, angle) = self.goal_errors(gi, frames);
        distance <= tolerance && angle * self.angle_scale(gi) <= tolerance
    }

    /// The length that turns goal `gi`'s orientation error (radians) into a distance: its
    /// chain's reach, at least its effector bone's length, at least the smallest positive length.
    pub(crate) fn angle_scale(&self, gi: usize) -> f64 {
        self.topology.chain_reach[gi].max(self.rig.bone(self.goals[gi].bone).length).max(f64::MIN_POSITIVE)
    }

    /// How far goal `gi`'s target lies beyond its chain's reach from `top_head`, the head of the
    /// chain's top bone where the pose puts it (negative: within reach). The report's test of a
    /// reachable target (TR-632 Alg. 1, line 1.3), with the reach [`Topology::chain_reach`] gives.
    pub(crate) fn beyond_reach_by(&self, gi: usize, top_head: DVec3) -> f64 {
        (self.goals[gi].target - top_head).length() - self.topology.chain_reach[gi]
    }

    /// The rig.
    #[must_use]
    pub fn rig(&self) -> &Rig {
        &self.rig
    }

    /// The goals, in the order given.
    #[must_use]
    pub fn goals(&self) -> &[Goal] {
        &self.goals
    }

    /// The root mode.
    #[must_use]
    pub fn root(&self) -> RootMode {
        self.root
    }

    /// The derived chain structure.
    #[must_use]
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// An id for what a solver may derive from this problem and keep between solves (FABRIK's
    /// plan, `solver/fabrik/plan.rs`): the rig with its limits, the root mode, and each goal's
    /// bone, chain length, weight, effector point (tail or head) and whether it has a pole. A new
    /// problem gets a new id, and so does every change of any of these ([`Problem::set_limit`]);
    /// moving a target or pole, or changing an orientation, a goal's kind or the reference, keeps
    /// it, and so does a clone, and moving a root bone's rest ([`Problem::set_root_rest`]: nothing
    /// derived reads a root's rest, only rests relative to a parent). Two problems with the same
    /// id have the same such structure.
    #[must_use]
    pub(crate) fn structure_id(&self) -> u64 {
        self.structure
    }

    /// Sets one bone's limits and re-derives what depends on them (a new
    /// `Problem::structure_id`).
    ///
    /// # Errors
    /// [`Error::UnknownBone`] or [`Error::LimitOutOfRange`]; nothing changes on error.
    pub fn set_limit(&mut self, bone: impl crate::rig::BoneRef, limit: crate::limits::JointLimit) -> Result<()> {
        self.rig.set_limit(bone, limit)?;
        let mut topology = Topology::derive(&self.rig, &self.goals);
        // (The goals and the moved bones are unchanged, so the groups stay within the cap.)
        topology.coupled = coupled_goals(&self.rig, &self.goals, &topology.is_active, self.root == RootMode::Free);
        self.topology = topology;
        self.structure = next_structure();
        Ok(())
    }

    /// Moves root bone `bone` to the rig-space rest frame of `matrix` ([`Rig::set_root_rest`]):
    /// the structure stays (what is derived from the rest data is relative to each bone's
    /// parent), so a sequence can follow an animated bone above its chains without a new
    /// problem per frame.
    ///
    /// # Errors
    /// As [`Rig::set_root_rest`]; nothing changes on error.
    pub fn set_root_rest(&mut self, bone: impl crate::rig::BoneRef, matrix: &glam::DMat4) -> Result<()> {
        self.rig.set_root_rest(bone, matrix)
    }

    /// Moves goal `i`'s target.
    ///
    /// # Errors
    /// [`Error::BadGoal`] for an index out of range or a non-finite target (nothing changes).
    pub fn set_target(&mut self, i: usize, target: DVec3) -> Result<()> {
        let g = self.goal_mut(i)?;
        check_point(target, "target").map_err(|reason| Error::BadGoal { goal: i, reason })?;
        g.target = target;
        Ok(())
    }

    /// Sets or clears goal `i`'s target orientation.
    ///
    /// # Errors
    /// [`Error::BadGoal`] for an index out of range, a non-finite or zero quaternion, none for an
    /// orientation goal or one for an aim goal.
    pub fn set_orientation(&mut self, i: usize, q: Option<DQuat>) -> Result<()> {
        let changed = Goal { orientation: q, ..*self.goal_mut(i)? };
        validate_goal(&self.rig, i, &changed)?;
        self.goal_mut(i)?.orientation = q.map(unit_quat);
        Ok(())
    }

    /// Sets goal `i`'s kind (its axis, direction or normal kept at unit length).
    ///
    /// # Errors
    /// [`Error::BadGoal`] for an index out of range, a zero or non-finite vector, an orientation
    /// kind on a goal without orientation or an aim on a goal with one (nothing changes).
    pub fn set_kind(&mut self, i: usize, kind: GoalKind) -> Result<()> {
        let changed = Goal { kind, ..*self.goal_mut(i)? };
        validate_goal(&self.rig, i, &changed)?;
        self.goal_mut(i)?.kind = kind.normalized();
        Ok(())
    }

    /// Moves goal `i`'s pole target (no-op error if the goal has no pole).
    ///
    /// # Errors
    /// [`Error::BadGoal`] for an index out of range, a goal without pole or a non-finite point.
    pub fn set_pole_target(&mut self, i: usize, target: DVec3) -> Result<()> {
        check_point(target, "pole target").map_err(|reason| Error::BadGoal { goal: i, reason })?;
        match &mut self.goal_mut(i)?.pole {
            Some(p) => {
                p.target = target;
                Ok(())
            }
            None => Err(Error::BadGoal { goal: i, reason: "has no pole".into() }),
        }
    }

    fn goal_mut(&mut self, i: usize) -> Result<&mut Goal> {
        let n = self.goals.len();
        self.goals.get_mut(i).ok_or_else(|| Error::BadGoal { goal: i, reason: format!("no such goal ({n} goals)") })
    }

    /// Checks that `pose` fits the rig: one finite, non-zero quaternion per bone and a finite
    /// root translation; returns it with unit quaternions.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] or [`Error::NonFinite`].
    pub fn checked_pose(&self, pose: &Pose) -> Result<Pose> {
        self.check_pose(pose)?;
        let mut out = pose.clone();
        for q in &mut out.rotations {
            // Idempotent: a solution read back (a sequence's next chunk, a re-solve) keeps its bits.
            *q = crate::geometry::unit_start(*q);
        }
        Ok(out)
    }

    /// Checks that `pose` fits the rig (as [`Problem::checked_pose`]) without copying it.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] or [`Error::NonFinite`].
    pub fn check_pose(&self, pose: &Pose) -> Result<()> {
        if pose.rotations.len() != self.rig.len() {
            return Err(Error::ShapeMismatch {
                what: "pose rotations".into(),
                expected: self.rig.len(),
                got: pose.rotations.len(),
            });
        }
        if !pose.scales.is_empty() {
            if pose.scales.len() != self.rig.len() {
                return Err(Error::ShapeMismatch { what: "pose length scales".into(), expected: self.rig.len(), got: pose.scales.len() });
            }
            for (i, &s) in pose.scales.iter().enumerate() {
                let bone = &self.rig.bone(i);
                if !s.is_finite() {
                    return Err(Error::NonFinite { what: format!("length scale of bone \"{}\"", bone.name) });
                }
                let range = if bone.limit.stretch > 0.0 {
                    format!("[{MIN_SCALE:e}, {MAX_SCALE:e}]")
                } else {
                    "[1, 1] (its stretch is 0: it keeps its length)".into()
                };
                if (bone.limit.stretch > 0.0 && !(MIN_SCALE..=MAX_SCALE).contains(&s)) || (bone.limit.stretch == 0.0 && s != 1.0) {
                    return Err(Error::LimitOutOfRange { bone: bone.name.clone(), what: "length scale".into(), value: s, range });
                }
            }
        }
        crate::rig::check_coordinate(pose.root_translation, || "root translation".into())?;
        for (i, q) in pose.rotations.iter().enumerate() {
            check_rotation(*q, || format!("rotation of bone \"{}\"", self.rig.bone(i).name))?;
        }
        Ok(())
    }
}

/// The reach of goal `g`'s chain `chain` (the bones it moves, effector first) from each bone's
/// head to the effector point: the links along the chain, less what a hinge's range keeps from
/// straightening ([`crate::JointLimit::reach_loss`]). Calls `at(k, reach)` for each bone
/// `chain[k]`; returns the whole chain's, from its top bone's head.
pub(crate) fn chain_reaches(rig: &Rig, g: &Goal, chain: &[usize], mut at: impl FnMut(usize, f64)) -> f64 {
    let mut reach = if g.use_tail { rig.bone(g.bone).length } else { 0.0 };
    for k in 0..chain.len() {
        if k > 0 {
            let c = chain[k - 1];
            reach += rig.bone(c).rest_head.length();
            // The point on c that leads on down the chain.
            let p = match k {
                1 if g.use_tail => DVec3::new(0.0, rig.bone(c).length, 0.0),
                1 => DVec3::ZERO,
                _ => rig.bone(chain[k - 2]).rest_head,
            };
            let bone = rig.bone(c);
            reach -= bone.limit.reach_loss(bone.rest_head, bone.rest_rotation, p);
        }
        at(k, reach);
    }
    reach
}

/// Whether `p` is finite and within [`crate::rig::MAX_COORDINATE`], as a reason naming `what`.
fn check_point(p: DVec3, what: &str) -> Result<(), String> {
    crate::rig::coordinate_problem(p).map_or(Ok(()), |r| Err(format!("{what} {r}")))
}

/// Checks a rotation a caller gives (a pose's, a reference's; `what` names it): finite and of
/// nonzero length ([`check_quat`]), and not so large that normalising it as it is overflows (the
/// solvers normalise a start as it is, `geometry::unit_start`; the adapters rescale such
/// quaternions first, [`rescaled_quat`]).
///
/// # Errors
/// [`Error::NonFinite`] or [`Error::TooLarge`].
pub(crate) fn check_rotation(q: DQuat, what: impl Fn() -> String) -> Result<()> {
    check_quat(q).map_err(|reason| Error::NonFinite { what: format!("{} ({reason})", what()) })?;
    if !q.length_squared().is_finite() {
        return Err(Error::TooLarge {
            what: format!("{} (largest component; scale the quaternion toward unit length)", what()),
            value: max_component(q),
            bound: 1e150,
        });
    }
    Ok(())
}

fn check_quat(q: DQuat) -> Result<(), String> {
    if !q.is_finite() {
        return Err("quaternion is not finite".into());
    }
    // Measured after rescaling, so a huge quaternion is not mistaken for a zero one.
    if rescaled_quat(q).length_squared() < 1e-18 {
        return Err("quaternion has zero length".into());
    }
    Ok(())
}

fn validate_goal(rig: &Rig, i: usize, g: &Goal) -> Result<()> {
    let bad = |reason: String| Error::BadGoal { goal: i, reason };
    if g.bone >= rig.len() {
        return Err(bad(format!("effector bone index {} is out of range (rig has {} bones)", g.bone, rig.len())));
    }
    check_point(g.target, "target").map_err(bad)?;
    if let Some(q) = g.orientation {
        check_quat(q).map_err(|r| bad(format!("orientation: {r}")))?;
    }
    if let Some(v) = g.kind.vector() {
        let name = match g.kind {
            GoalKind::Aim { .. } => "axis",
            GoalKind::Line { .. } => "direction",
            _ => "normal",
        };
        // Scale-free: only its direction counts, so any finite nonzero length will do.
        if !(v.is_finite() && v.normalize_or_zero() != DVec3::ZERO) {
            return Err(bad(format!("{} goal: {name} {v} must be finite and nonzero", g.kind.name())));
        }
    }
    match g.kind {
        GoalKind::Orientation if g.orientation.is_none() => return Err(bad("an orientation goal needs an orientation".into())),
        GoalKind::Aim { .. } if g.orientation.is_some() => {
            return Err(bad("an aim goal sets the bone's direction, not its orientation: give it no orientation".into()));
        }
        _ => {}
    }
    if !(g.weight.is_finite() && g.weight > 0.0) {
        return Err(bad(format!("weight {} must be positive", g.weight)));
    }
    if !WEIGHT_RANGE.contains(&g.weight) {
        return Err(bad(format!(
            "weight {:e} is outside the supported range [{:e}, {:e}] (weights are relative: scale them all)",
            g.weight,
            WEIGHT_RANGE.start(),
            WEIGHT_RANGE.end()
        )));
    }
    if let Some(p) = g.pole {
        if !p.angle.is_finite() {
            return Err(bad("pole angle is not finite".into()));
        }
        check_point(p.target, "pole target").map_err(bad)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::JointLimit;
    use crate::rig::Bone;

    /// hips → spine → chest → {neck → head, shoulder.L → arm.L, shoulder.R → arm.R}
    fn torso() -> Rig {
        let mk = |name: &str, parent: Option<usize>, head: DVec3| Bone {
            name: name.into(),
            parent,
            rest_head: head,
            rest_rotation: DQuat::IDENTITY,
            length: 1.0,
            limit: JointLimit::FREE,
        };
        Rig::new(vec![
            mk("hips", None, DVec3::ZERO),
            mk("spine", Some(0), DVec3::Y),
            mk("chest", Some(1), DVec3::Y),
            mk("neck", Some(2), DVec3::Y),
            mk("head", Some(3), DVec3::Y),
            mk("shoulder.L", Some(2), DVec3::new(0.2, 0.8, 0.0)),
            mk("arm.L", Some(5), DVec3::Y),
            mk("shoulder.R", Some(2), DVec3::new(-0.2, 0.8, 0.0)),
            mk("arm.R", Some(7), DVec3::Y),
        ])
        .unwrap()
    }

    #[test]
    fn sub_bases_are_where_chains_meet() {
        let rig = torso();
        let goals = vec![Goal::new(4, DVec3::ZERO), Goal::new(6, DVec3::ZERO), Goal::new(8, DVec3::ZERO)];
        let p = Problem::new(rig, goals, RootMode::Pinned).unwrap();
        assert_eq!(p.topology().sub_bases, vec![2]);
        assert_eq!(p.topology().moved[1], vec![6, 5, 2, 1, 0]);
        assert_eq!(p.topology().active.len(), 9);
    }

    #[test]
    fn chain_length_limits_what_moves() {
        let goals = vec![Goal::new(6, DVec3::ZERO).with_chain_length(2), Goal::new(8, DVec3::ZERO).with_chain_length(2)];
        let p = Problem::new(torso(), goals, RootMode::Pinned).unwrap();
        assert!(p.topology().sub_bases.is_empty());
        assert_eq!(p.topology().moved[0], vec![6, 5]);
    }

    /// The structure id changes with what a solver's plan derives from (see
    /// [`Problem::structure_id`]), and with nothing else.
    #[test]
    fn structure_id_changes_with_the_structure_only() {
        let goals = vec![Goal::new(6, DVec3::ZERO).with_pole(DVec3::X, 0.0), Goal::new(4, DVec3::Y).with_orientation(DQuat::IDENTITY)];
        let mut p = Problem::new(torso(), goals.clone(), RootMode::Pinned).unwrap();
        let id = p.structure_id();
        assert_ne!(Problem::new(torso(), goals, RootMode::Pinned).unwrap().structure_id(), id);
        assert_eq!(p.clone().structure_id(), id);
        p.set_target(0, DVec3::Z).unwrap();
        p.set_pole_target(0, DVec3::Z).unwrap();
        p.set_orientation(1, Some(DQuat::from_rotation_x(0.3))).unwrap();
        p.set_kind(0, GoalKind::Plane { normal: DVec3::Y }).unwrap();
        p.set_reference(Reference::Pose(Pose::rest(9))).unwrap();
        assert_eq!(p.structure_id(), id);
        let before = p.clone();
        p.set_limit(5, JointLimit::FREE).unwrap();
        let changed = p.structure_id();
        assert_ne!(changed, id);
        // (Not part of the value: the same problem still.)
        assert_eq!(p, before);
        assert!(p.set_limit(99, JointLimit::FREE).is_err());
        assert_eq!(p.structure_id(), changed);
    }

    #[test]
    fn bad_goals_are_rejected() {
        let bad = [
            Goal::new(99, DVec3::ZERO),
            Goal::new(1, DVec3::new(f64::NAN, 0.0, 0.0)),
            Goal::new(1, DVec3::ZERO).with_weight(0.0),
            Goal::new(1, DVec3::ZERO).with_orientation(DQuat::from_xyzw(0.0, 0.0, 0.0, 0.0)),
            Goal::new(1, DVec3::ZERO).with_pole(DVec3::INFINITY, 0.0),
        ];
        for g in bad {
            assert!(matches!(Problem::new(torso(), vec![g], RootMode::Pinned), Err(Error::BadGoal { goal: 0, .. })), "{g:?}");
        }
        let mut p = Problem::new(torso(), vec![Goal::new(1, DVec3::ZERO)], RootMode::Pinned).unwrap();
        assert!(p.set_target(0, DVec3::NAN).is_err());
        assert!(p.set_target(3, DVec3::ZERO).is_err());
        assert_eq!(p.goals()[0].target, DVec3::ZERO);
    }
}
