//! The damped-least-squares system `(J Jᵀ + λ² I) y = r` of [`super::jacobian`], stored and
//! solved block by block.
//!
//! A goal's residual rows move only with the bones on its path to the root, so two goals couple
//! in `J Jᵀ` only through a bone both paths cross ([`crate::problem::Topology::coupled`]).
//! Grouping the rows by coupled goals makes `J Jᵀ` block diagonal: each block is factorised on
//! its own (Cholesky, written out here: at three to a few hundred rows, cheaper than a general
//! library's), so a rig of many independent limbs costs time and memory linear in its goals
//! instead of the cube and square of their count. Within a block the rows keep their order, so
//! the lower triangle of the block is the lower triangle of `J Jᵀ`.

/// The block structure of a Gram matrix over `m` rows, and the blocks' storage.
#[derive(Debug, Clone, Default)]
pub(crate) struct GramBlocks {
    /// Per row: its block and its index within the block.
    row_block: Vec<usize>,
    row_local: Vec<usize>,
    /// Per block: its rows, ascending (`rows[start[k]..start[k + 1]]`).
    rows: Vec<usize>,
    start: Vec<usize>,
    /// Per block: where its row-major `size × size` matrix starts in `values`.
    offset: Vec<usize>,
    /// Every block's matrix (lower triangle read; after [`GramBlocks::factor_solve`], its
    /// Cholesky factor).
    pub(crate) values: Vec<f64>,
    /// Scratch: one block's right-hand side in its own row order; per label its block; per
    /// block its size.
    gathered: Vec<f64>,
    number: Vec<usize>,
    sizes: Vec<usize>,
}

impl GramBlocks {
    /// Lays out the blocks for rows whose block is `block_of(row)` (any labels, a row's label
    /// shared by exactly the rows it couples with), and zeroes the storage.
    pub(crate) fn layout(&mut self, m: usize, block_of: impl Fn(usize) -> usize, labels: usize) {
        // Labels to block numbers in order of first row, so a single block keeps the rows'
        // order exactly.
        let (number, sizes) = (&mut self.number, &mut self.sizes);
        number.clear();
        number.resize(labels, usize::MAX);
        sizes.clear();
        self.row_block.clear();
        self.row_local.clear();
        for row in 0..m {
            let label = block_of(row);
            if number[label] == usize::MAX {
                number[label] = sizes.len();
                sizes.push(0);
            }
            let k = number[label];
            self.row_block.push(k);
            self.row_local.push(sizes[k]);
            sizes[k] += 1;
        }
        self.start.clear();
        self.offset.clear();
        let (mut s, mut o) = (0, 0);
        for &size in sizes.iter() {
            self.start.push(s);
            self.offset.push(o);
            s += size;
            o += size * size;
        }
        self.start.push(s);
        self.rows.clear();
        self.rows.resize(m, 0);
        for row in 0..m {
            let k = self.row_block[row];
            self.rows[self.start[k] + self.row_local[row]] = row;
        }
        self.values.clear();
        self.values.resize(o, 0.0);
    }

    /// Zeroes every block.
    pub(crate) fn clear(&mut self) {
        self.values.fill(0.0);
    }

    /// The storage index of entry (`row`, `col`) of two coupled rows.
    #[inline]
    pub(crate) fn index(&self, row: usize, col: usize) -> usize {
        let k = self.row_block[row];
        debug_assert_eq!(k, self.row_block[col], "rows {row} and {col} are in different blocks");
        let size = self.start[k + 1] - self.start[k];
        self.offset[k] + self.row_local[row] * size + self.row_local[col]
    }

    /// Adds `v` to entry (`row`, `col`) of two coupled rows.
    #[inline]
    pub(crate) fn add(&mut self, row: usize, col: usize, v: f64) {
        let i = self.index(row, col);
        self.values[i] += v;
    }

    /// Adds `block` to the 3 × 3 block at rows `row..row + 3` and columns `col..col + 3` (each
    /// three consecutive rows of one goal, coupled).
    #[inline]
    pub(crate) fn add3(&mut self, row: usize, col: usize, block: glam::DMat3) {
        let k = self.row_block[row];
        let size = self.start[k + 1] - self.start[k];
        let base = self.index(row, col);
        for i in 0..3 {
            let r = &mut self.values[base + i * size..base + i * size + 3];
            r[0] += block.x_axis[i];
            r[1] += block.y_axis[i];
            r[2] += block.z_axis[i];
        }
    }

    /// Entry (`row`, `col`), zero for rows in different blocks.
    pub(crate) fn get(&self, row: usize, col: usize) -> f64 {
        if self.row_block[row] == self.row_block[col] { self.values[self.index(row, col)] } else { 0.0 }
    }

    /// Solves the system for `b` in place (rows in the matrix's order), each block overwritten
    /// by its Cholesky factor; false when a block is not positive definite to working
    /// precision (`b` is then unusable).
    pub(crate) fn factor_solve(&mut self, b: &mut [f64]) -> bool {
        for k in 0..self.offset.len() {
            let size = self.start[k + 1] - self.start[k];
            let a = &mut self.values[self.offset[k]..self.offset[k] + size * size];
            if !cholesky_factor(a, size) {
                return false;
            }
        }
        self.substitute(b);
        true
    }

    /// Solves with the factors [`GramBlocks::factor_solve`] left, for another `b` in place.
    pub(crate) fn substitute(&mut self, b: &mut [f64]) {
        if self.offset.len() == 1 {
            // One block: its rows are the matrix's, in order.
            cholesky_substitute(&self.values, b.len(), b);
            return;
        }
        for k in 0..self.offset.len() {
            let rows = &self.rows[self.start[k]..self.start[k + 1]];
            let size = rows.len();
            self.gathered.clear();
            self.gathered.extend(rows.iter().map(|&r| b[r]));
            cholesky_substitute(&self.values[self.offset[k]..self.offset[k] + size * size], size, &mut self.gathered);
            for (&r, &x) in rows.iter().zip(&self.gathered) {
                b[r] = x;
            }
        }
    }
}

/// Overwrites symmetric positive-definite `a` (row-major, m × m, only its lower triangle read)
/// with its Cholesky factor `L` (`A = L Lᵀ`). False when a pivot is not positive (`A` not
/// positive definite to working precision; NaN included).
#[allow(clippy::neg_cmp_op_on_partial_ord)] // NaN refused: see the pivot test
pub(crate) fn cholesky_factor(a: &mut [f64], m: usize) -> bool {
    for j in 0..m {
        let row_j = &mut a[j * m..(j + 1) * m];
        let d = row_j[j] - row_j[..j].iter().map(|x| x * x).sum::<f64>();
        // (Negated so that a NaN pivot is refused too.)
        if !(d > 0.0) {
            return false;
        }
        let d = d.sqrt();
        row_j[j] = d;
        let inv = 1.0 / d;
        let (upto_j, rest) = a.split_at_mut((j + 1) * m);
        let row_j = &upto_j[j * m..j * m + j];
        for i in j + 1..m {
            let row_i = &mut rest[(i - j - 1) * m..(i - j) * m];
            let s = row_i[j] - row_i[..j].iter().zip(row_j).map(|(x, y)| x * y).sum::<f64>();
            row_i[j] = s * inv;
        }
    }
    true
}

/// Solves `L Lᵀ x = b` in place for the factor `L` [`cholesky_factor`] left in `a`.
pub(crate) fn cholesky_substitute(a: &[f64], m: usize, b: &mut [f64]) {
    // L z = b, then Lᵀ x = z.
    for i in 0..m {
        let row = &a[i * m..i * m + i];
        b[i] = (b[i] - row.iter().zip(&b[..i]).map(|(x, y)| x * y).sum::<f64>()) / a[i * m + i];
    }
    for i in (0..m).rev() {
        let s = (i + 1..m).map(|k| a[k * m + i] * b[k]).sum::<f64>();
        b[i] = (b[i] - s) / a[i * m + i];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A positive-definite 4 × 4 matrix `L Lᵀ`.
    fn spd() -> Vec<f64> {
        let m = 4;
        let l = [[2.0, 0.0, 0.0, 0.0], [0.5, 1.5, 0.0, 0.0], [-0.3, 0.2, 1.1, 0.0], [0.7, -0.4, 0.25, 0.9]];
        let mut a = vec![0.0; m * m];
        for i in 0..m {
            for j in 0..m {
                a[i * m + j] = (0..m).map(|k| l[i][k] * l[j][k]).sum();
            }
        }
        a
    }

    #[test]
    fn cholesky_solves_a_positive_definite_system() {
        let m = 4;
        let mut a = spd();
        let x = [1.0, -2.0, 0.5, 3.0];
        let mut b: Vec<f64> = (0..m).map(|i| (0..m).map(|j| a[i * m + j] * x[j]).sum()).collect();
        let full = a.clone();
        assert!(cholesky_factor(&mut a, m));
        cholesky_substitute(&a, m, &mut b);
        for i in 0..m {
            assert!((b[i] - x[i]).abs() < 1e-12, "{b:?}");
        }
        // Not positive definite.
        let mut bad = full;
        bad[3 * m + 3] = -1.0;
        assert!(!cholesky_factor(&mut bad, m));
    }

    /// Two interleaved blocks (rows 0, 2, 3, 5 and rows 1, 4) solve as the dense block-diagonal
    /// system they form, and entries across blocks read zero.
    #[test]
    fn blocks_solve_as_the_block_diagonal_system() {
        let label = |r: usize| usize::from(r == 1 || r == 4);
        let mut blocks = GramBlocks::default();
        blocks.layout(6, label, 2);
        let a = spd();
        let small = [[3.0, 0.5], [0.5, 2.0]];
        let big_rows = [0, 2, 3, 5];
        let small_rows = [1, 4];
        let mut dense = [[0.0; 6]; 6];
        for (i, &ri) in big_rows.iter().enumerate() {
            for (j, &rj) in big_rows.iter().enumerate() {
                dense[ri][rj] = a[i * 4 + j];
            }
        }
        for (i, &ri) in small_rows.iter().enumerate() {
            for (j, &rj) in small_rows.iter().enumerate() {
                dense[ri][rj] = small[i][j];
            }
        }
        for (r, row) in dense.iter().enumerate() {
            for (c, &v) in row.iter().enumerate().take(r + 1) {
                if label(r) == label(c) {
                    let i = blocks.index(r, c);
                    blocks.values[i] = v;
                }
            }
        }
        assert_eq!(blocks.get(4, 0), 0.0);
        let x = [1.0, -2.0, 0.5, 3.0, 0.25, -1.5];
        let mut b: Vec<f64> = (0..6).map(|i| (0..6).map(|j| dense[i][j] * x[j]).sum()).collect();
        assert!(blocks.factor_solve(&mut b));
        for i in 0..6 {
            assert!((b[i] - x[i]).abs() < 1e-12, "{b:?}");
        }
        let mut again: Vec<f64> = (0..6).map(|i| (0..6).map(|j| dense[i][j] * x[j]).sum()).collect();
        blocks.substitute(&mut again);
        assert_eq!(again, b);
    }
}
