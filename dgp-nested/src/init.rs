//! Initialisation of a nested layer (the paper gives no values,
//! all ours): Z by k-means on the layer's (propagated) input means, kernel hyperparameters
//! from the config, q(u) started at a linear map (hidden layers) or at the prior (last),
//! and the layer's noise variance.

use crate::config::NestedConfig;
use crate::layer::{NOISE_FLOOR, NestedLayer, Q_SQRT_FLOOR};
use dgp_core::Result;
use dgp_core::linalg::{JitterConfig, Tri, cholesky_jittered, tri_solve_in_place};
use dgp_core::rng::Rng;
use dgp_core::transforms::{inv_softplus, raw_lower_factor};
use dgp_data::kmeans;
use dgp_traits::kernels::{Kernel, KernelHyper};
use dgp_traits::layer::HYPER_FLOOR;
use dgp_traits::mean::pca_projection;
use dgp_traits::params::{ParamId, ParamStore, Role};
use dgp_traits::skeleton::LayerPlan;
use faer::{Mat, MatRef, Par};

/// Registers the parameters of layer `plan` whose inputs have the running means `inputs`
/// (the data for the first layer) and returns the layer.
///
/// # Errors
/// A Kuu that is not positive definite after jitter; k-means or PCA failures.
pub(crate) fn init_layer(
    params: &mut ParamStore,
    config: &NestedConfig,
    plan: &LayerPlan,
    inputs: MatRef<'_, f64>,
    rng: &mut Rng,
) -> Result<NestedLayer> {
    let (name, din, dout) = (&plan.name, plan.input_dim, plan.output_dim);
    let hidden = !plan.last;
    let m = config.num_inducing;
    let z = kmeans(inputs, m, config.kmeans_iters, rng)?;
    let kernel = Kernel::new(config.kernel, din, config.ard)?;
    let n_ls = kernel.lengthscale_shape().1;
    let zid = params.add(format!("{name}.z"), z.clone(), Role::Optimised)?;
    let ls0 = inv_softplus(config.init_lengthscale - HYPER_FLOOR);
    let lsid = params.add(
        format!("{name}.kernel.lengthscales"),
        Mat::from_fn(1, n_ls, |_, _| ls0),
        Role::Optimised,
    )?;
    let varid = if kernel.has_variance() {
        Some(params.add(
            format!("{name}.kernel.variance"),
            Mat::from_fn(1, 1, |_, _| {
                inv_softplus(config.init_variance - HYPER_FLOOR)
            }),
            Role::Optimised,
        )?)
    } else {
        None
    };
    let hyper = KernelHyper {
        lengthscales: Mat::from_fn(1, n_ls, |_, _| config.init_lengthscale),
        variance: config.init_variance,
    };
    let jitter = JitterConfig::default();
    let kuu = kernel.gram(z.as_ref(), hyper.as_ref());
    let (lk, _) = cholesky_jittered(kuu.as_ref(), &format!("initial Kuu of {name}"), jitter)?;
    // Hidden layers: W is the identity / PCA projection of the layer's inputs.
    let w = if hidden {
        Some(pca_projection(inputs, dout)?)
    } else {
        None
    };
    let linear_mean = hidden && config.linear_mean;
    let (q_mean, factor) = initial_q(config, &z, lk, w.as_ref(), dout);
    let qmid = params.add(format!("{name}.q.mean"), q_mean, Role::Optimised)?;
    let raw = raw_lower_factor(factor.as_ref(), Q_SQRT_FLOOR);
    let q_sqrt = (0..dout)
        .map(|d| params.add(format!("{name}.q.sqrt{d}"), raw.clone(), Role::Optimised))
        .collect::<Result<Vec<_>>>()?;
    let noise = add_noise(params, config, name, hidden)?;
    let mean_weights = match w {
        Some(w) if linear_mean => {
            Some(params.add(format!("{name}.mean.weights"), w, Role::Fixed)?)
        }
        _ => None,
    };
    Ok(NestedLayer {
        name: name.clone(),
        kernel,
        output_dim: dout,
        num_inducing: m,
        jitter,
        whiten: config.whiten,
        z: zid,
        lengthscales: lsid,
        variance: varid,
        q_mean: qmid,
        q_sqrt,
        noise,
        mean_weights,
    })
}

/// q(u)'s initial mean and covariance factor. Hidden (W given): m = Z W, S = scale²·K —
/// or, with a linear mean, m = 0 (W carries the inputs, the GP residual starts at 0); last:
/// m = 0, S = K. Whitened: m̃ = L⁻¹m, S̃ = L⁻¹ S L⁻ᵀ, i.e. L̃ = scale·I or I.
fn initial_q(
    config: &NestedConfig,
    z: &Mat<f64>,
    lk: Mat<f64>,
    w: Option<&Mat<f64>>,
    dout: usize,
) -> (Mat<f64>, Mat<f64>) {
    let m = z.nrows();
    match w {
        Some(w) => {
            let s = config.hidden_q_scale;
            let mut mean = if config.linear_mean {
                Mat::zeros(m, dout)
            } else {
                z * w
            };
            let f = if config.whiten {
                tri_solve_in_place(lk.as_ref(), mean.as_mut(), Tri::Lower, Par::Seq);
                Mat::from_fn(m, m, |i, j| if i == j { s } else { 0.0 })
            } else {
                Mat::from_fn(m, m, |i, j| s * lk[(i, j)])
            };
            (mean, f)
        }
        None if config.whiten => (Mat::zeros(m, dout), Mat::<f64>::identity(m, m)),
        None => (Mat::zeros(m, dout), lk),
    }
}

/// The layer's noise variance σ²: `layer{i}.noise` (hidden; trained per the config) or
/// `likelihood.variance` (last; trained).
fn add_noise(
    params: &mut ParamStore,
    config: &NestedConfig,
    name: &str,
    hidden: bool,
) -> Result<ParamId> {
    let (noise_name, noise0, train_noise) = if hidden {
        (
            format!("{name}.noise"),
            config.hidden_noise,
            config.train_hidden_noise,
        )
    } else {
        (
            "likelihood.variance".to_string(),
            config.likelihood_noise,
            true,
        )
    };
    params.add(
        noise_name,
        Mat::from_fn(1, 1, |_, _| inv_softplus(noise0 - NOISE_FLOOR)),
        Role::optimised_if(train_noise),
    )
}
