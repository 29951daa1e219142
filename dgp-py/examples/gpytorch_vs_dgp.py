"""Fits the same data with GPyTorch's deep GP (DSVI, Salimbeni & Deisenroth 2017, as in
GPyTorch's deep-GP tutorial) and with ``dgp``'s ``svi`` backend, and prints both training
times and test NLLs (mean negative log predictive density, original units).

    python dgp-py/examples/gpytorch_vs_dgp.py [--n 20000] [--steps 2000] [--csv FILE --target COL]

Both sides use the same architecture: two layers, M inducing points per GP, a hidden layer
of width 5, minibatches of 1000, Adam at lr 0.01, one Monte Carlo sample in training and
100 in prediction, inputs and targets standardised with the training rows' statistics. The
data are the library's synthetic problem (``dgp.synth``) unless a CSV file is given.
GPyTorch is optional: without ``torch`` and ``gpytorch`` installed its half is skipped.
"""

import argparse
import math
import time

import numpy as np

import dgp


def load(args):
    if args.csv:
        import pandas as pd

        df = pd.read_csv(args.csv)
        y = df.pop(args.target).to_numpy(np.float64)
        X = df.to_numpy(np.float64)
    else:
        X, y = dgp.synth(args.n, seed=args.seed)
    rng = np.random.default_rng(args.seed)
    idx = rng.permutation(len(y))
    cut = int(0.9 * len(y))
    return X[idx[:cut]], y[idx[:cut]], X[idx[cut:]], y[idx[cut:]]


def fit_dgp(args, Xtr, ytr, Xte, yte):
    m = dgp.DeepGPRegressor(
        "svi",
        layers=2,
        num_inducing=args.inducing,
        hidden_width=5,
        steps=args.steps,
        batch_size=args.batch,
        learning_rate=0.01,
        train_samples=1,
        predict_samples=100,
        early_stopping=None,
        random_state=args.seed,
    )
    t0 = time.perf_counter()
    m.fit(Xtr, ytr)
    seconds = time.perf_counter() - t0
    return seconds, -m.score(Xte, yte)


def fit_gpytorch(args, Xtr, ytr, Xte, yte):
    import gpytorch
    import torch
    from gpytorch.kernels import RBFKernel, ScaleKernel
    from gpytorch.likelihoods import GaussianLikelihood
    from gpytorch.means import ConstantMean, LinearMean
    from gpytorch.mlls import DeepApproximateMLL, VariationalELBO
    from gpytorch.models.deep_gps import DeepGP, DeepGPLayer
    from gpytorch.variational import CholeskyVariationalDistribution, VariationalStrategy

    torch.manual_seed(args.seed)
    torch.set_default_dtype(torch.float64)
    xm, xs = Xtr.mean(0), Xtr.std(0)
    xs[xs == 0] = 1
    ym, ys = ytr.mean(), ytr.std()
    tx = torch.tensor((Xtr - xm) / xs)
    ty = torch.tensor((ytr - ym) / ys)
    vx = torch.tensor((Xte - xm) / xs)
    vy = torch.tensor((yte - ym) / ys)

    class Layer(DeepGPLayer):
        def __init__(self, d_in, d_out, m, linear_mean):
            shape = torch.Size([] if d_out is None else [d_out])
            z = torch.randn(*shape, m, d_in)
            q = CholeskyVariationalDistribution(m, batch_shape=shape)
            strategy = VariationalStrategy(self, z, q, learn_inducing_locations=True)
            super().__init__(strategy, d_in, d_out)
            self.mean_module = LinearMean(d_in) if linear_mean else ConstantMean()
            self.covar_module = ScaleKernel(RBFKernel(batch_shape=shape, ard_num_dims=d_in), batch_shape=shape)

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    class Model(DeepGP):
        def __init__(self):
            super().__init__()
            self.hidden = Layer(tx.shape[1], 5, args.inducing, True)
            self.last = Layer(5, None, args.inducing, False)
            self.likelihood = GaussianLikelihood()

        def forward(self, x):
            return self.last(self.hidden(x))

    model = Model()
    mll = DeepApproximateMLL(VariationalELBO(model.likelihood, model, tx.shape[0]))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(args.seed)
    model.train()
    t0 = time.perf_counter()
    with gpytorch.settings.num_likelihood_samples(1):
        for _ in range(args.steps):
            idx = torch.randint(0, tx.shape[0], (min(args.batch, tx.shape[0]),), generator=gen)
            opt.zero_grad()
            loss = -mll(model(tx[idx]), ty[idx])
            loss.backward()
            opt.step()
    seconds = time.perf_counter() - t0
    model.eval()
    with torch.no_grad(), gpytorch.settings.num_likelihood_samples(100):
        lls = []
        for start in range(0, vx.shape[0], 1000):
            xb, yb = vx[start : start + 1000], vy[start : start + 1000]
            lls.append(model.likelihood.log_marginal(yb, model(xb)))
        ll = torch.cat(lls, -1)  # (samples, N)
        tll = torch.logsumexp(ll, 0) - math.log(ll.shape[0])
    # Original units: the standardised density divided by the target's scale.
    return seconds, float(-(tll.mean() - math.log(ys)))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=20000, help="synthetic rows (without --csv)")
    p.add_argument("--csv", help="a CSV file with a header row")
    p.add_argument("--target", default="y", help="the CSV file's target column")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--inducing", type=int, default=128)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    Xtr, ytr, Xte, yte = load(args)
    print(f"{len(ytr)} training rows, {len(yte)} test rows, {Xtr.shape[1]} inputs, {args.steps} steps")
    secs, nll = fit_dgp(args, Xtr, ytr, Xte, yte)
    print(f"dgp (svi)       train {secs:8.2f} s   test NLL {nll:.4f}")
    try:
        import gpytorch  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        print("GPyTorch       skipped (pip install torch gpytorch to compare)")
        return
    secs, nll = fit_gpytorch(args, Xtr, ytr, Xte, yte)
    print(f"GPyTorch (DSVI) train {secs:8.2f} s   test NLL {nll:.4f}")


if __name__ == "__main__":
    main()
