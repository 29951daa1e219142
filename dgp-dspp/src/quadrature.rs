//! Learned quadrature rules QR1, QR2 and QR3 (paper §3.2, eqs. 22–23): which site of each
//! hidden GP every mixture component uses, how the sites are parameterised, and their
//! initial values.
//!
//! A rule for hidden width W with S sites per GP has K components:
//! * QR3: K = S, component k uses site row k for every GP (`ξ_w^{(k)}`);
//! * QR1/QR2: K = S^W, component k is the multi-index `(s_1, …, s_W)` given by the base-S
//!   digits of k with the **last** GP varying fastest (the layout of
//!   [`dgp_traits::quadrature::gh_grid`]), and uses `ξ_w^{(s_w)}` for GP w.
//!
//! Every layer l ≥ 2 owns an S×W site matrix Ξ^{(l)} (QR2: its free upper half); component
//! k of layer l uses the entries of Ξ^{(l)} selected by k's multi-index, so components are
//! "lined up" across layers (Jankowiak et al. 2020, §3, propagated as GPyTorch's `DSPPLayer` does) and the predictive is a mixture of
//! exactly K Gaussians whatever the depth. The K weights are `softmax` of K free logits,
//! shared by all layers.

use crate::config::{Rule, SiteInit};
use dgp_core::rng::{Rng, standard_normal};
use dgp_core::{Error, Result};
use dgp_traits::quadrature::GaussHermite;
use dgp_traits::tape::{Tape, Var};
use faer::Mat;
use serde::{Deserialize, Serialize};

/// A quadrature rule's combinatorics: S sites per GP, W GPs per hidden layer, K components.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuadRule {
    /// The rule.
    pub rule: Rule,
    /// Sites per GP, S.
    pub sites: usize,
    /// Hidden width W (GPs whose outputs are replaced by sites).
    pub width: usize,
    /// Number of mixture components K (S for QR3, S^W for QR1/QR2).
    pub components: usize,
}

impl QuadRule {
    /// The rule with `sites` sites per GP for hidden layers of width `width`.
    ///
    /// # Errors
    /// [`Error::Config`] for `sites == 0`, `width == 0` or a grid too large for `usize`.
    pub fn new(rule: Rule, sites: usize, width: usize) -> Result<Self> {
        if sites == 0 || width == 0 {
            return Err(Error::config(
                "sites",
                "quadrature rule needs at least one site and one GP",
            ));
        }
        let components = match rule {
            Rule::Qr3 => sites,
            Rule::Qr1 | Rule::Qr2 => u32::try_from(width)
                .ok()
                .and_then(|w| sites.checked_pow(w))
                .ok_or_else(|| {
                    Error::config("sites", format!("{sites}^{width} grid components overflow"))
                })?,
        };
        Ok(QuadRule {
            rule,
            sites,
            width,
            components,
        })
    }

    /// Index (0-based, into the S rows of Ξ) of the site that component `k` uses for GP `w`.
    pub fn site_index(&self, k: usize, w: usize) -> usize {
        match self.rule {
            Rule::Qr3 => k,
            Rule::Qr1 | Rule::Qr2 => {
                let shift = self.width - 1 - w;
                (k / self.sites.pow(shift as u32)) % self.sites
            }
        }
    }

    /// Rows of the free site parameter block of one layer: S (QR1, QR3) or ⌊S/2⌋ (QR2).
    pub fn free_rows(&self) -> usize {
        match self.rule {
            Rule::Qr2 => self.sites / 2,
            Rule::Qr1 | Rule::Qr3 => self.sites,
        }
    }

    /// Initial free site parameters of one layer (`free_rows × W`) and K×1 weight logits
    /// (callers keep the logits of one draw and the sites of every layer).
    pub fn init(&self, init: SiteInit, rng: &mut Rng) -> Result<(Mat<f64>, Mat<f64>)> {
        let (s, w, k) = (self.sites, self.width, self.components);
        match init {
            SiteInit::Random => {
                let free = standard_normal(rng, self.free_rows(), w);
                let logits = standard_normal(rng, k, 1);
                Ok((free, logits))
            }
            SiteInit::GaussHermite => {
                let gh = GaussHermite::probabilists(s)?;
                let free = Mat::from_fn(self.free_rows(), w, |i, _| gh.nodes[i]);
                let logits = Mat::from_fn(k, 1, |c, _| match self.rule {
                    Rule::Qr3 => gh.weights[c].max(1e-300).ln(),
                    Rule::Qr1 | Rule::Qr2 => (0..w)
                        .map(|g| gh.weights[self.site_index(c, g)].max(1e-300).ln())
                        .sum(),
                });
                Ok((free, logits))
            }
        }
    }

    /// The full S×W site matrix Ξ of one layer from its free block: the block itself for
    /// QR1/QR3; for QR2 `Ξ_s = half_s`, `Ξ_{S−1−s} = −half_s` (s < ⌊S/2⌋) and a zero middle
    /// row when S is odd. `free` is `None` only for QR2 with S = 1 (no free parameter).
    pub fn record_full(&self, tape: &mut Tape, free: Option<Var>) -> Var {
        match (self.rule, free) {
            (Rule::Qr2, None) => tape.constant(Mat::zeros(self.sites, self.width)),
            (Rule::Qr2, Some(half)) => {
                let (s, p) = (self.sites, self.sites / 2);
                let c = Mat::from_fn(s, p, |i, j| {
                    if i == j {
                        1.0
                    } else if i == s - 1 - j {
                        -1.0
                    } else {
                        0.0
                    }
                });
                let c = tape.constant(c);
                tape.matmul(c, half)
            }
            (_, Some(full)) => full,
            (_, None) => unreachable!("QR1/QR3 always have a site block"),
        }
    }

    /// The site of every (component, point) row for GP w: an R×W matrix with
    /// `R = K·b`, row `k·b + i` holding `Ξ[site_index(k, w), w]` (component-major rows, the
    /// layout of the tiled hidden marginals).
    pub fn record_tiled(&self, tape: &mut Tape, full: Var, b: usize) -> Var {
        let (s, w, k) = (self.sites, self.width, self.components);
        let flat = tape.reshape_col_major(full, s * w, 1);
        let r = k * b;
        let mut idx = Vec::with_capacity(r * w);
        for g in 0..w {
            for c in 0..k {
                let j = self.site_index(c, g) + s * g;
                idx.extend(std::iter::repeat_n(j, b));
            }
        }
        let col = tape.gather_rows(flat, &idx);
        tape.reshape_col_major(col, r, w)
    }

    /// Plain-value version of [`Self::record_full`] (no tape).
    pub fn full_values(&self, free: Option<faer::MatRef<'_, f64>>) -> Mat<f64> {
        let mut t = Tape::new();
        let v = free.map(|f| t.constant(f.to_owned()));
        let full = self.record_full(&mut t, v);
        t.value(full).to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dgp_core::rng::seeded;
    use dgp_traits::quadrature::gh_grid;

    #[test]
    fn grid_digits_match_gh_grid_layout() {
        let q = QuadRule::new(Rule::Qr1, 3, 2).unwrap();
        assert_eq!(q.components, 9);
        let (nodes, weights) = gh_grid(3, 2).unwrap();
        let (free, logits) = q.init(SiteInit::GaussHermite, &mut seeded(0)).unwrap();
        for c in 0..9 {
            for g in 0..2 {
                assert_eq!(free[(q.site_index(c, g), g)], nodes[(c, g)]);
            }
            assert!((logits[(c, 0)].exp() - weights[c]).abs() < 1e-15);
        }
    }

    #[test]
    fn qr2_sites_are_symmetric() {
        for s in 1..6 {
            let q = QuadRule::new(Rule::Qr2, s, 2).unwrap();
            let (free, _) = q.init(SiteInit::Random, &mut seeded(3)).unwrap();
            let free = (q.free_rows() > 0).then_some(free.as_ref());
            let full = q.full_values(free);
            for i in 0..s {
                for g in 0..2 {
                    assert_eq!(full[(i, g)], -full[(s - 1 - i, g)]);
                }
            }
        }
    }

    #[test]
    fn qr2_gauss_hermite_init_is_the_gh_rule() {
        let q = QuadRule::new(Rule::Qr2, 5, 1).unwrap();
        let (free, _) = q.init(SiteInit::GaussHermite, &mut seeded(0)).unwrap();
        let full = q.full_values(Some(free.as_ref()));
        let gh = GaussHermite::probabilists(5).unwrap();
        for i in 0..5 {
            assert!((full[(i, 0)] - gh.nodes[i]).abs() < 1e-15);
        }
    }
}
