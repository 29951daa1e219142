//! Criterion benches of the hot paths: one svi DGP2 gradient step (forward + backward +
//! Adam update + set_flat) at N = 1000 batch, M = 128, D = 8, hidden width 5, with 1 and
//! 10 training samples; and the prediction of 1000 points with 100 mixture components.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use dgp_core::rng::{seeded, standard_normal, stream};
use dgp_data::Dataset;
use dgp_svi::{SviConfig, SviModel};
use dgp_traits::model::{Batch, Model, Objective, PredictConfig};
use dgp_traits::optim::{Adam, AdamConfig};
use dgp_traits::tape::Tape;
use faer::{Mat, Par};

const N: usize = 1000;
const D: usize = 8;
const M: usize = 128;
const HIDDEN: usize = 5;

fn data() -> Dataset {
    let mut rng = seeded(42);
    let x = standard_normal(&mut rng, N, D);
    let eps = standard_normal(&mut rng, N, 1);
    let y = Mat::from_fn(N, 1, |i, _| {
        let s: f64 = (0..D).map(|j| x[(i, j)]).sum();
        (s / (D as f64).sqrt()).sin() + 0.1 * eps[(i, 0)]
    });
    Dataset::new(x, y).expect("finite synthetic data")
}

fn model(train_samples: usize, data: &Dataset) -> SviModel {
    SviModel::new(
        SviConfig {
            layers: 2,
            num_inducing: M,
            hidden_width: Some(HIDDEN),
            train_samples,
            ..SviConfig::default()
        },
        data,
    )
    .expect("model")
}

fn gradient_step(c: &mut Criterion) {
    let data = data();
    let mut group = c.benchmark_group("svi_dgp2_step_N1000_M128_D8_W5");
    group.sample_size(20);
    for s in [1usize, 10] {
        let mut m = model(s, &data);
        let mut adam = Adam::new(AdamConfig::with_lr(0.01), m.params().num_free()).expect("adam");
        let mut flat = m.params().flat();
        let mut tape = Tape::with_par(Par::rayon(0));
        let mut noise = stream(0, 1);
        group.bench_function(format!("S={s}"), |bch| {
            bch.iter(|| {
                let batch = Batch::new(data.x(), data.y(), N).expect("batch");
                let (v, g) = m
                    .value_and_grad(&mut tape, &batch, &mut noise)
                    .expect("grad");
                adam.ascend(&mut flat, &g).expect("adam");
                m.params_mut().set_flat(&flat).expect("set_flat");
                black_box(v)
            })
        });
    }
    group.finish();
}

fn prediction(c: &mut Criterion) {
    let data = data();
    let m = model(1, &data);
    let cfg = PredictConfig {
        samples: 100,
        seed: 1,
    };
    let mut group = c.benchmark_group("svi_dgp2_predict_N1000_M128_D8_W5");
    group.sample_size(10);
    group.bench_function("S=100", |bch| {
        bch.iter(|| black_box(m.predict(data.x(), &cfg).expect("predict")))
    });
    group.finish();
}

criterion_group!(benches, gradient_step, prediction);
criterion_main!(benches);
