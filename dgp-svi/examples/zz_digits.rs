use dgp_svi::prelude::*;
use dgp_traits::classification::{ClassMetrics, ClassProbs};
use dgp_traits::data::{ClassDataset, Standardizer};
use dgp_traits::likelihoods::Likelihood;
fn main() {
    let d = ClassDataset::load("/work/shared/data/classification/optdigits", None).unwrap();
    let s = d.split(0).unwrap();
    let st = Standardizer::fit(&s.train);
    let train = Dataset::new(st.transform_x(s.train.x()).unwrap(), s.train.y().to_owned()).unwrap();
    let tx = st.transform_x(s.test.x()).unwrap();
    for lik in [Likelihood::robust_max(10), Likelihood::softmax(10)] {
        let t = std::time::Instant::now();
        let cfg = SviConfig {
            layers: 1,
            num_inducing: 100,
            likelihood: lik.clone(),
            ..Default::default()
        };
        let mut m = DeepGp::new(cfg, &train).unwrap();
        m.fit(
            &train,
            &FitConfig {
                steps: 1500,
                batch_size: 500,
                learning_rate: 0.01,
                ..Default::default()
            },
            &mut Silent,
        )
        .unwrap();
        let p = m
            .predict(
                tx.as_ref(),
                &PredictConfig {
                    samples: 1,
                    seed: 1,
                },
            )
            .unwrap();
        let met = ClassMetrics::compute(&ClassProbs::from_predictive(&p).unwrap(), &s.test_labels)
            .unwrap();
        println!(
            "{:?}: {met:?} ({:.0} s)",
            lik.family(),
            t.elapsed().as_secs_f64()
        );
    }
}
