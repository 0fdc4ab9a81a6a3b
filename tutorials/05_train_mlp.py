"""Training a small MLP with tex-compiled forward and backward
==========================================================

A two-layer perceptron classifies points of three interleaved spirals. The model and its
softmax cross-entropy loss are tensor expressions; ``tex.differentiate`` gives the gradients
of the loss with respect to the four parameters; one compiled function computes the loss
and every gradient, and plain SGD updates the parameters in NumPy. The loss printed each
epoch goes down, and the accuracy up.
"""
# %%
# The data: three spirals
# -----------------------
import os
import time

import numpy as np

import tex
import tex.testing
from tex import topi

small = os.environ.get("TEX_TUTORIAL_SMALL") == "1"
classes, per_class, hidden = 3, (64 if small else 256), (32 if small else 128)
batch = 48 if small else 96
epochs = 30 if small else 60
rng = np.random.default_rng(0)

t = np.linspace(0.0, 1.0, per_class)
points, labels = [], []
for c in range(classes):
    angle = 4.0 * t + 2.0 * np.pi * c / classes + rng.normal(0, 0.15, per_class)
    points.append(np.stack([t * np.sin(angle), t * np.cos(angle)], axis=1))
    labels.append(np.full(per_class, c))
data = np.concatenate(points).astype(np.float32)
label = np.concatenate(labels)
onehot = np.eye(classes, dtype=np.float32)[label]
print(f"{len(data)} points, {classes} classes, hidden width {hidden}, batch {batch}")

# %%
# The model and the loss
# ----------------------
# ``logits = tanh(X W1^T + b1) W2^T + b2`` and the mean cross-entropy against one-hot
# targets. ``tex.differentiate`` returns the gradients as new tensors.
X = tex.placeholder((batch, 2), "float32", name="X")
Yt = tex.placeholder((batch, classes), "float32", name="Y")
W1 = tex.placeholder((hidden, 2), "float32", name="W1")
b1 = tex.placeholder((hidden,), "float32", name="b1")
W2 = tex.placeholder((classes, hidden), "float32", name="W2")
b2 = tex.placeholder((classes,), "float32", name="b2")
hidden_act = topi.tanh(topi.nn.dense(X, W1, b1))
logits = topi.nn.dense(hidden_act, W2, b2)
loss = topi.nn.cross_entropy_with_logits(logits, Yt)
params = [W1, b1, W2, b2]
grads = list(tex.differentiate(loss, params))
for g in grads:
    print(f"{g.name}: {g.shape}")

# %%
# Check, then compile
# -------------------
# The gradients agree with finite differences (float64 is used for the check, at a tiny
# size, by building the same model again), then one function computes the loss and the
# four gradients; another the logits, for the accuracy.
Xs = tex.placeholder((4, 2), "float64", name="Xs")
Ys = tex.placeholder((4, classes), "float64", name="Ys")
Ws = [tex.placeholder((5, 2), "float64", name="W1s"), tex.placeholder((5,), "float64", name="b1s"),
      tex.placeholder((classes, 5), "float64", name="W2s"),
      tex.placeholder((classes,), "float64", name="b2s")]
small_loss = topi.nn.cross_entropy_with_logits(
    topi.nn.dense(topi.tanh(topi.nn.dense(Xs, Ws[0], Ws[1])), Ws[2], Ws[3]), Ys)
feed = {p: rng.standard_normal(p.shape) for p in [Xs, *Ws]}
feed[Ys] = np.eye(classes)[rng.integers(0, classes, 4)]
tex.testing.check_grad(small_loss, Ws, data=feed)
print("gradients agree with finite differences")

t0 = time.perf_counter()
step = tex.build([loss, *grads], name="mlp_grad")
predict = tex.build([logits], name="mlp_logits")
print(f"compiled in {time.perf_counter() - t0:.2f} s; step takes {[a.name for a in step.args]}")

# %%
# Plain SGD
# ---------
# Glorot-scaled initial weights; each epoch visits the points in a new random order.
values = {W1: (rng.standard_normal((hidden, 2)) * np.sqrt(1.0 / 2)).astype(np.float32),
          b1: np.zeros(hidden, np.float32),
          W2: (rng.standard_normal((classes, hidden)) * np.sqrt(1.0 / hidden)).astype(np.float32),
          b2: np.zeros(classes, np.float32)}
out_loss = np.empty((), np.float32)
out_grads = [np.empty(p.shape, np.float32) for p in params]
out_logits = np.empty((batch, classes), np.float32)
lr = 0.5
n_batches = len(data) // batch


def accuracy() -> float:
    hits = 0
    for b in range(n_batches):
        rows = slice(b * batch, (b + 1) * batch)
        predict(data[rows], values[W1], values[b1], values[W2], values[b2], out_logits)
        hits += int((out_logits.argmax(axis=1) == label[rows]).sum())
    return hits / (n_batches * batch)


history = []
for epoch in range(epochs):
    order = rng.permutation(len(data))
    total = 0.0
    for b in range(n_batches):
        rows = order[b * batch:(b + 1) * batch]
        xb = np.ascontiguousarray(data[rows])
        yb = np.ascontiguousarray(onehot[rows])
        step(xb, yb, values[W1], values[b1], values[W2], values[b2], out_loss, *out_grads)
        for p, g in zip(params, out_grads):
            values[p] -= lr * g
        total += float(out_loss)
    history.append(total / n_batches)
    if epoch % max(1, epochs // 10) == 0 or epoch == epochs - 1:
        print(f"epoch {epoch:3d}  loss {history[-1]:.4f}  accuracy {accuracy():.2f}")

assert history[-1] < 0.8 * history[0], history
print(f"loss went from {history[0]:.3f} to {history[-1]:.3f}")
