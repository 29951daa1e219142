//! The seed corpora of the fuzz targets (`fuzz/seeds/<target>/`, see `fuzz/README.md`)
//! are inputs the loaders accept, so that every campaign starts from the deep end of each
//! format. This test checks that the committed seeds still load (a format change that
//! leaves them behind fails here, not silently in the fuzzer's coverage); with
//! `DGP_FUZZ_WRITE_SEEDS=1` in the environment it first writes the generated ones
//! (model files of every backend, a checkpoint, Parquet files, row stores) anew.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Float32Array, Float64Array, Int32Array, Int64Array, RecordBatch};
use common::Scratch;
use dgp_bench::BACKENDS;
use dgp_bench::datasets::BenchData;
use dgp_traits::backend::CommonSettings;
use dgp_traits::data::{Dataset, Standardizer};
use dgp_traits::fit::{FitConfig, FitHooks};
use dgp_traits::fitted::{MODEL_FILE_FORMAT, MODEL_FILE_VERSION, model_checksum};
use dgp_traits::guard::{CHECKPOINT_FILE_VERSION, verify_checkpoint};

fn seeds(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/seeds")
        .join(target)
}

fn writing() -> bool {
    std::env::var_os("DGP_FUZZ_WRITE_SEEDS").is_some()
}

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = seeds(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

/// The first 12 rows of the embedded concrete data, with names.
fn small_data() -> Dataset {
    let b = BenchData::embedded_concrete().unwrap();
    let idx: Vec<usize> = (0..12).collect();
    let d = b.data().select_rows(&idx).unwrap();
    let names = (0..d.input_dim()).map(|j| format!("x{j}")).collect();
    d.with_feature_names(names)
        .unwrap()
        .with_target_names(vec!["y".into()])
        .unwrap()
}

/// An untrained model of every backend (a model file holds any model, trained or not):
/// the whole file (selector k) and the model's own JSON (selector 7 + k) of the
/// `model_file` target, k the model type's position there.
fn write_model_seeds() {
    let data = small_data();
    let standardizer = Standardizer::fit(&data);
    let train = standardizer.transform(&data).unwrap();
    let std_json = serde_json::to_value(&standardizer).unwrap();
    use dgp_traits::fitted::Loadable;
    // The model types in the order of the `model_file` target's selector.
    let order: [&[&str]; 7] = [
        dgp_svi::SviModel::BACKENDS,
        dgp_structured::StructuredModel::BACKENDS,
        dgp_dspp::DsppModel::BACKENDS,
        dgp_dspp::PpgprModel::BACKENDS,
        dgp_nested::NestedModel::BACKENDS,
        dgp_hmc::DgpsModel::BACKENDS,
        dgp_hmc::SghmcModel::BACKENDS,
    ];
    for b in BACKENDS {
        for layers in [1, 2] {
            let common = CommonSettings {
                preset: "default".into(),
                layers,
                num_inducing: 4,
                hidden_width: Some(2),
                train_samples: 2,
                predict_samples: 2,
                seed: 0,
                tune: false,
                learning_rate: None,
                lr_schedule: None,
            };
            let settings = Default::default();
            let built = b.backend.build(
                &common,
                &settings,
                &FitConfig::default(),
                &train,
                &FitHooks::none(),
            );
            // Not every backend has both depths (ppgpr is one-layer, star needs two):
            // the check below asks for a seed of every model type.
            let Ok(model) = built else { continue };
            let k = order
                .iter()
                .position(|names| names.contains(&model.backend()))
                .unwrap_or_else(|| panic!("no model type for {}", model.backend()));
            let json = model.to_json().unwrap();
            let predict = serde_json::json!({"samples": 5, "seed": 24301});
            let file = serde_json::json!({
                "format": MODEL_FILE_FORMAT,
                "version": MODEL_FILE_VERSION,
                "backend": model.backend(),
                "checksum": model_checksum(&std_json.to_string(), &json, Some(&predict.to_string())),
                "standardizer": std_json,
                "predict": predict,
                "model": json,
            })
            .to_string();
            let name = format!("{}-L{layers}", model.backend());
            write("model_file", &name, &[&[k as u8], file.as_bytes()].concat());
            write(
                "model_file",
                &format!("{name}-model"),
                &[&[7 + k as u8], json.as_bytes()].concat(),
            );
        }
    }
}

/// A checkpoint of a few svi steps on the embedded data: the whole file (selector 0) and
/// the state alone (selector 1) of the `checkpoint` target.
fn write_checkpoint_seeds() {
    let s = Scratch::new("fuzz-seeds-checkpoint");
    let out = common::bench(&[
        "run",
        "--data",
        "builtin:concrete",
        "--backend",
        "svi",
        "--layers",
        "1",
        "--steps",
        "3",
        "--inducing",
        "4",
        "--splits",
        "0",
        "--quiet",
        "--checkpoint",
        &s.s("ck"),
        "--out",
        &s.s("out"),
    ]);
    assert!(out.status.success(), "{}", common::stderr(&out));
    for entry in std::fs::read_dir(s.path("ck")).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        write("checkpoint", "svi-L1", &[b"\0", text.as_bytes()].concat());
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let state = v["state"].to_string();
        write(
            "checkpoint",
            "svi-L1-state",
            &[b"\x01", state.as_bytes()].concat(),
        );
    }
}

fn parquet_bytes(columns: Vec<(&str, ArrayRef)>) -> Vec<u8> {
    let batch = RecordBatch::try_from_iter(columns).unwrap();
    let mut buf = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut buf, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    buf
}

fn write_parquet_seeds() {
    let a: ArrayRef = Arc::new(Float64Array::from(vec![0.5, 1.5, -2.0, 3.25, 4.0]));
    let b: ArrayRef = Arc::new(Int32Array::from(vec![1, 2, 3, 4, 5]));
    let c: ArrayRef = Arc::new(Float32Array::from(vec![0.1f32, 0.2, 0.3, 0.4, 0.5]));
    let i: ArrayRef = Arc::new(Int64Array::from(vec![7i64, -8, 9, 10, 11]));
    let y: ArrayRef = Arc::new(Float64Array::from(vec![1.0, 2.0, 3.0, 4.0, 5.0]));
    write(
        "parquet",
        "mixed.parquet",
        &parquet_bytes(vec![
            ("a", a.clone()),
            ("b", b),
            ("c", c),
            ("i", i),
            ("y", y.clone()),
        ]),
    );
    write(
        "parquet",
        "two.parquet",
        &parquet_bytes(vec![("a", a), ("y", y)]),
    );
}

fn write_rowstore_seeds() {
    let s = Scratch::new("fuzz-seeds-rowstore");
    let data = small_data();
    let p = s.path("f.rows");
    dgp_io::rowstore::write_dataset(&p, &data, &[]).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    write(
        "rowstore",
        "concrete12",
        &[b"\0", bytes.as_slice()].concat(),
    );
    write(
        "rowstore",
        "concrete12-fix",
        &[b"\x01", bytes.as_slice()].concat(),
    );
}

#[test]
fn committed_fuzz_seeds_are_accepted_inputs() {
    if writing() {
        write_model_seeds();
        write_checkpoint_seeds();
        write_parquet_seeds();
        write_rowstore_seeds();
    }
    let s = Scratch::new("fuzz-seeds");
    // Model files: each whole-file seed loads through its backend's model type.
    let mut models = 0;
    for entry in std::fs::read_dir(seeds("model_file")).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let (sel, text) = (bytes[0], std::str::from_utf8(&bytes[1..]).unwrap());
        if sel >= 7 {
            continue;
        }
        let loaded = match sel {
            0 => dgp_traits::fitted::Fitted::<dgp_svi::SviModel>::from_file_json(text).map(|_| ()),
            1 => {
                dgp_traits::fitted::Fitted::<dgp_structured::StructuredModel>::from_file_json(text)
                    .map(|_| ())
            }
            2 => {
                dgp_traits::fitted::Fitted::<dgp_dspp::DsppModel>::from_file_json(text).map(|_| ())
            }
            3 => {
                dgp_traits::fitted::Fitted::<dgp_dspp::PpgprModel>::from_file_json(text).map(|_| ())
            }
            4 => dgp_traits::fitted::Fitted::<dgp_nested::NestedModel>::from_file_json(text)
                .map(|_| ()),
            5 => dgp_traits::fitted::Fitted::<dgp_hmc::DgpsModel>::from_file_json(text).map(|_| ()),
            _ => {
                dgp_traits::fitted::Fitted::<dgp_hmc::SghmcModel>::from_file_json(text).map(|_| ())
            }
        };
        loaded.unwrap_or_else(|e| panic!("model seed with selector {sel}: {e}"));
        models += 1;
    }
    let mut kinds: Vec<u8> = std::fs::read_dir(seeds("model_file"))
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap()[0])
        .filter(|&k| k < 7)
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    assert_eq!(kinds, (0..7).collect::<Vec<u8>>(), "{models} model seeds");
    // Checkpoints: the whole file loads with its own fingerprint.
    for entry in std::fs::read_dir(seeds("checkpoint")).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        if bytes[0] != 0 {
            continue;
        }
        let p = s.path("ck.json");
        std::fs::write(&p, &bytes[1..]).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&bytes[1..]).unwrap();
        assert_eq!(v["version"], CHECKPOINT_FILE_VERSION);
        let fp = v["fingerprint"].clone();
        verify_checkpoint(&p, &String::from_utf8_lossy(&bytes[1..]), &fp).unwrap();
    }
    // Parquet files and row stores load.
    for entry in std::fs::read_dir(seeds("parquet")).unwrap() {
        let path = entry.unwrap().path();
        BenchData::load(path.to_str().unwrap(), None, 0)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    for entry in std::fs::read_dir(seeds("rowstore")).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        let p = s.path("f.rows");
        std::fs::write(&p, &bytes[1..]).unwrap();
        dgp_io::rowstore::RowStore::open(&p)
            .unwrap()
            .to_dataset()
            .unwrap();
    }
}
