//! Gather throughput of a row store file against the same rows in memory:
//! `cargo run --release -p dgp-io --example gather_throughput -- FILE.rows [BATCH] [BATCHES]`.

use std::path::PathBuf;
use std::time::Instant;

use dgp_data::rowstore::RowStore;
use dgp_data::{Minibatches, RowSource};
use faer::Mat;

fn rate<S: RowSource>(src: &S, batch: usize, batches: usize) -> f64 {
    let mut mb = Minibatches::new(src.n(), batch, 0).expect("minibatches");
    let mut x = Mat::zeros(batch, src.input_dim());
    let mut y = Mat::zeros(batch, src.output_dim());
    let t = Instant::now();
    for _ in 0..batches {
        src.gather(mb.next_batch(), x.as_mut(), y.as_mut())
            .expect("gather");
    }
    (batch * batches) as f64 / t.elapsed().as_secs_f64()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = PathBuf::from(args.next().ok_or("usage: gather_throughput FILE.rows")?);
    let batch: usize = args.next().map_or(Ok(1000), |s| s.parse())?;
    let batches: usize = args.next().map_or(Ok(2000), |s| s.parse())?;
    let store = RowStore::open(&path)?;
    let t = Instant::now();
    let st = dgp_data::fit_standardizer(
        &store,
        Default::default(),
        dgp_data::chunks::DEFAULT_CHUNK_ROWS,
    )?;
    let fit = t.elapsed().as_secs_f64();
    println!(
        "{}: streamed standardiser fit {fit:.2} s ({:.3e} rows/s per pass-set); y mean {:.4}",
        store.describe(),
        store.n() as f64 / fit,
        st.y_mean[0]
    );
    let file_rate = rate(&store, batch, batches);
    let mem = store.to_dataset()?;
    let mem_rate = rate(&mem, batch, batches);
    println!(
        "random minibatch gather, batch {batch}: row store {file_rate:.3e} rows/s, in memory {mem_rate:.3e} rows/s"
    );
    Ok(())
}
