//! Model files (`dgp_traits::fitted`): the versioned, checksummed envelope
//! (`Fitted::from_file_json`) and each backend's own validated loader
//! (`Loadable::from_model_json`) for every model type: svi, structured, dspp, ppgpr,
//! nested, dgps, sghmc.
//!
//! Input: a selector byte (model type = selector mod 7; mode = selector / 7 mod 2), then
//! text. Mode 0: the text is a whole model file. Mode 1: the text is the model's own JSON
//! (what the checksum would otherwise keep the fuzzer from reaching). Checked: no panic,
//! no unbounded allocation; an accepted model saves to the same text it loads from
//! (round trip) and predicts at a few points either finite means and non-negative
//! variances or a typed error; a refusal is a typed error.
#![no_main]

use dgp_fuzz::selector;
use dgp_traits::Error;
use dgp_traits::fitted::{Fitted, Loadable};
use dgp_traits::model::PredictConfig;
use dgp_traits::predictive::Predictive;
use faer::Mat;
use libfuzzer_sys::fuzz_target;

/// Inputs wider than this are not predicted at (the test points would cost memory the
/// fuzzer's limit is there to catch in the loader, not in the harness).
const MAX_PREDICT_DIM: usize = 64;

fn check_prediction(p: Result<Predictive, Error>, rows: usize) {
    let Ok(p) = p else { return };
    assert_eq!(p.n_points(), rows);
    for (m, v) in p.means().iter().zip(p.variances()) {
        for i in 0..m.nrows() {
            for j in 0..m.ncols() {
                assert!(
                    m[(i, j)].is_finite(),
                    "a loaded model predicts mean {}",
                    m[(i, j)]
                );
                let var = v[(i, j)];
                assert!(
                    var.is_finite() && var >= 0.0,
                    "a loaded model predicts variance {var}"
                );
            }
        }
    }
    assert!(p.weights().iter().all(|w| w.is_finite() && *w >= 0.0));
}

fn whole_file<M: Loadable>(text: &str) {
    let f = match Fitted::<M>::from_file_json(text) {
        Ok(f) => f,
        Err(e) => {
            assert!(matches!(e, Error::ModelFile { .. }), "{e}");
            return;
        }
    };
    let saved = f.to_file_json().expect("a loaded model saves");
    let again = Fitted::<M>::from_file_json(&saved).expect("a saved model loads");
    assert_eq!(again.to_file_json().unwrap(), saved);
    let d = f.standardizer().input_dim;
    if d <= MAX_PREDICT_DIM {
        let x = Mat::from_fn(2, d, |i, j| (i as f64) - 0.5 * j as f64);
        check_prediction(
            f.predict_with(
                x.as_ref(),
                &PredictConfig {
                    samples: 2,
                    seed: 1,
                },
            ),
            2,
        );
    }
}

fn model_json<M: Loadable>(text: &str) {
    let Ok(m) = M::from_model_json(text) else {
        return;
    };
    let json = m.to_json().expect("a loaded model serialises");
    let again = M::from_model_json(&json).expect("a serialised model loads");
    assert_eq!(again.to_json().unwrap(), json);
    let cfg = PredictConfig {
        samples: 2,
        seed: 1,
    };
    for d in 1..=8 {
        let x = Mat::from_fn(2, d, |i, j| (i as f64) - 0.5 * j as f64);
        match m.predict(x.as_ref(), &cfg) {
            Err(Error::Shape { .. }) => continue,
            other => {
                check_prediction(other, 2);
                break;
            }
        }
    }
}

fn run<M: Loadable>(mode: u8, text: &str) {
    if mode == 0 {
        whole_file::<M>(text)
    } else {
        model_json::<M>(text)
    }
}

fuzz_target!(|data: &[u8]| {
    let (sel, rest) = selector(data);
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let mode = (sel / 7) % 2;
    match sel % 7 {
        0 => run::<dgp_svi::SviModel>(mode, text),
        1 => run::<dgp_structured::StructuredModel>(mode, text),
        2 => run::<dgp_dspp::DsppModel>(mode, text),
        3 => run::<dgp_dspp::PpgprModel>(mode, text),
        4 => run::<dgp_nested::NestedModel>(mode, text),
        5 => run::<dgp_hmc::DgpsModel>(mode, text),
        _ => run::<dgp_hmc::SghmcModel>(mode, text),
    }
});
