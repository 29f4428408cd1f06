#!/usr/bin/python3
"""Trains in PyTorch what examples/train_resnet trains with its default flags, to compare whole runs.

    /usr/bin/python3 bench/torch_train_resnet.py [--epochs 10] [--threads N] [--train-limit N] ...

The same configuration as examples/train_resnet.cpp and examples/training.cpp:
  model     ResNet-20 for 1x28x28 (bench/compare_training.py's, the architecture and initialisation
            of examples/models.cpp)
  data      Fashion-MNIST from the gzipped IDX files (--data, else $EMBER_DATA/fashion-mnist, else
            /usr/share/datasets/fashion-mnist), pixels / 255, the first --train-limit training
            images when set; normalised with mean 0.2860 and std 0.3530 (ember's constants)
  augment   per image: zero-pad 2 pixels on every side and crop 28x28 at a uniformly random
            position, then mirror left-right with probability 0.5, then normalise (the padding is
            zero before normalisation, as data::Compose(RandomCrop(28, 2), RandomHorizontalFlip(),
            Normalize) in ember)
  batches   --batch-size 128, reshuffled every epoch, the last batch smaller (no drop_last); the
            test set in batches of 256, unshuffled
  optimizer SGD lr 0.1, momentum 0.9, weight decay 5e-4, no dampening, no Nesterov
  schedule  CosineAnnealingLR with T_max = epochs * batches per epoch, stepped after every
            optimizer step (so the last step of the run uses lr near 0)
  step      forward, cross_entropy (mean), zero_grad(set_to_none=True), backward, optimizer step,
            schedule step, then the batch's loss and correct count read back (.item()), as fit()
  eval      after every epoch: model.eval(), no autograd, mean loss and top-1 accuracy on the test set
  threads   --threads N -> torch.set_num_threads(N); 0 (the default, as ember's) is every core

The data is decoded once into one tensor before the timed run, and each batch is gathered,
cropped, flipped and normalised with a few whole-batch tensor operations on the training thread
(under 1 ms for 128 images, against a step of hundreds of ms), so loading is not the bottleneck;
the time it takes is reported as data_wait_pct, as ember reports its loader's wait. ember's loader
makes its batches on worker threads instead. The random order and crops are not ember's (ember
draws from Philox streams), so accuracies agree only up to run-to-run noise.

The clocks are fit()'s: wall_s sums every epoch's training and evaluation (not decoding the data
set or building the model), images_per_s is training images over training time, and step_ms is
training time less data wait, per step. The last line is machine-readable and uses the names of
ember's result line (examples/training.cpp, result_line) where it has the same quantity; ember's
peak_bytes and step_peak_bytes count its own allocator and have no counterpart here.

Unless OMP_WAIT_POLICY is already set, it is set to PASSIVE before PyTorch loads OpenMP, as
ember's programs do (Note [OpenMP wait policy] in examples/training.h).
"""
import argparse
import gzip
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_torch import import_torch  # noqa: E402
from compare_training import make_models  # noqa: E402  (the ResNet-20 of examples/models.cpp)

# Fashion-MNIST's training-set pixel mean and standard deviation after scaling to [0, 1]
# (examples/training.cpp, fashion_mnist_loaders).
MEAN, STD = 0.2860, 0.3530
CROP_PADDING = 2
TEST_BATCH_SIZE = 256
IDX_UNSIGNED_BYTE = 0x08  # the only element type Fashion-MNIST uses


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])

    def number(kind, zero_allowed):  # ember's kPositive and kNonNegative (examples/training.h)
        wanted = "a finite number >= 0" if zero_allowed else "a finite number > 0"

        def parse(text):
            try:
                value = kind(text)
            except ValueError:
                value = math.nan
            if not (math.isfinite(value) and (value >= 0 if zero_allowed else value > 0)):
                raise argparse.ArgumentTypeError(f"expected {wanted}, got '{text}'")
            return value
        return parse

    def positive(kind):
        return number(kind, zero_allowed=False)

    def non_negative(kind):
        return number(kind, zero_allowed=True)

    def boolean(text):  # ember's --augment takes true/false (CLI11)
        if text.lower() in ("1", "true", "on", "yes"):
            return True
        if text.lower() in ("0", "false", "off", "no"):
            return False
        raise argparse.ArgumentTypeError(f"expected true or false, got '{text}'")

    # The names and defaults of examples/train_resnet's flags (add_common_flags and its own).
    parser.add_argument("--epochs", type=positive(int), default=10, help="training epochs (default 10)")
    parser.add_argument("--batch-size", type=positive(int), default=128, help="images per batch (default 128)")
    parser.add_argument("--lr", type=positive(float), default=0.1, help="peak learning rate (default 0.1)")
    parser.add_argument("--momentum", type=non_negative(float), default=0.9, help="SGD momentum (default 0.9)")
    parser.add_argument("--weight-decay", type=non_negative(float), default=5e-4,
                        help="SGD weight decay (default 5e-4)")
    parser.add_argument("--augment", type=boolean, default=True, help="random crops and flips (default true)")
    parser.add_argument("--threads", type=non_negative(int), default=0, help="CPU threads (0: every core, the default)")
    parser.add_argument("--seed", type=non_negative(int), default=1, help="random seed (default 1)")
    parser.add_argument("--train-limit", type=non_negative(int), default=0,
                        help="train on the first N images only (0: all, the default)")
    parser.add_argument("--data", default="", help="Fashion-MNIST directory (default: $EMBER_DATA/fashion-mnist "
                        "or /usr/share/datasets/fashion-mnist)")
    return parser.parse_args()


def dataset_directory(root):
    """data::dataset_directory's rule (data/idx.h)."""
    if root:
        return root
    return os.path.join(os.environ.get("EMBER_DATA") or "/usr/share/datasets", "fashion-mnist")


def read_idx(torch, path):
    """A gzipped IDX file of unsigned bytes as a uint8 tensor of its shape."""
    with gzip.open(path, "rb") as f:
        raw = bytearray(f.read())
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != IDX_UNSIGNED_BYTE or raw[3] < 1:
        sys.exit(f"torch_train_resnet.py: {path}: not an IDX file of unsigned bytes")
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    if len(raw) != 4 + 4 * dims + math.prod(shape):
        sys.exit(f"torch_train_resnet.py: {path}: {len(raw)} bytes for the shape {shape}")
    return torch.frombuffer(raw, dtype=torch.uint8, offset=4 + 4 * dims).view(shape)


def load_split(torch, directory, split):
    """(images [N, 1, 28, 28] float32 in [0, 1], labels [N] int64), as data::FashionMNIST."""
    if not os.path.isdir(directory):
        sys.exit(f"torch_train_resnet.py: data directory {directory} not found "
                 "(pass --data, or set EMBER_DATA to the folder above it)")
    images = read_idx(torch, os.path.join(directory, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(torch, os.path.join(directory, f"{split}-labels-idx1-ubyte.gz"))
    if images.dim() != 3 or labels.dim() != 1 or len(images) != len(labels):
        sys.exit(f"torch_train_resnet.py: {directory}: {split} images {list(images.shape)} do not match labels "
                 f"{list(labels.shape)}")
    # x / 255 in float32, as torchvision's ToTensor and ember's reader compute it
    return images.unsqueeze(1).float() / 255.0, labels.long()


def normalize(x):
    return (x - MEAN) / STD


def augment(torch, x, generator):
    """A random 28x28 crop of each image zero-padded by CROP_PADDING, then a left-right flip with
    probability 0.5, each image drawing its own."""
    F = torch.nn.functional
    n, _, h, w = x.shape
    padded = F.pad(x, (CROP_PADDING,) * 4)
    top = torch.randint(0, 2 * CROP_PADDING + 1, (n, 1, 1), generator=generator)
    left = torch.randint(0, 2 * CROP_PADDING + 1, (n, 1, 1), generator=generator)
    rows = top + torch.arange(h).view(1, h, 1)
    cols = left + torch.arange(w).view(1, 1, w)
    cropped = padded[torch.arange(n).view(n, 1, 1), 0, rows, cols].unsqueeze(1)
    flip = torch.rand(n, generator=generator) < 0.5
    return torch.where(flip.view(n, 1, 1, 1), cropped.flip(3), cropped)


def train_batches(torch, images, labels, batch_size, augmenting, generator):
    """One epoch of (x, y): a new permutation, the last batch smaller."""
    order = torch.randperm(len(images), generator=generator)
    for start in range(0, len(images), batch_size):
        index = order[start:start + batch_size]
        x = images[index]
        if augmenting:
            x = augment(torch, x, generator)
        yield normalize(x), labels[index]


def correct_targets(logits, y):
    return int((logits.argmax(-1) == y).sum())


def evaluate(torch, model, images, labels):
    """(mean cross-entropy, top-1 accuracy) on the test set, as examples::evaluate."""
    F = torch.nn.functional
    model.eval()
    loss_sum, correct = 0.0, 0
    with torch.no_grad():
        for start in range(0, len(images), TEST_BATCH_SIZE):
            x, y = normalize(images[start:start + TEST_BATCH_SIZE]), labels[start:start + TEST_BATCH_SIZE]
            logits = model(x)
            loss_sum += float(F.cross_entropy(logits, y)) * len(y)
            correct += correct_targets(logits, y)
    model.train()
    return loss_sum / len(labels), correct / len(labels)


def progress(epoch, epochs, batch, batches, loss, acc, seen, elapsed):
    """fit()'s progress bar as it prints into a log: a line every tenth of the epoch."""
    if batch != batches and batch % max(batches // 10, 1) != 0:
        return
    width = 24
    filled = width * batch // max(batches, 1)
    eta = elapsed / batch * (batches - batch)
    print(f"epoch {epoch}/{epochs} [{'=' * filled}{' ' * (width - filled)}] {batch}/{batches} loss {loss:.4f} "
          f"acc {acc:.4f} {seen / elapsed:.0f} img/s ETA {eta:.0f}s", flush=True)


def main():
    args = parse_args()
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read by libgomp when torch loads it
    torch = import_torch()
    F = torch.nn.functional

    threads = args.threads or os.cpu_count()
    torch.set_num_threads(threads)
    torch.manual_seed(args.seed)
    directory = dataset_directory(args.data)
    train_images, train_labels = load_split(torch, directory, "train")
    test_images, test_labels = load_split(torch, directory, "t10k")
    if args.train_limit > len(train_images):
        sys.exit(f"torch_train_resnet.py: cannot take {args.train_limit} examples of a data set of "
                 f"{len(train_images)}")
    if args.train_limit:
        train_images, train_labels = train_images[:args.train_limit], train_labels[:args.train_limit]
    batches = math.ceil(len(train_images) / args.batch_size)

    make_resnet = make_models(torch)["resnet20"][0]
    model = make_resnet()
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * batches)
    generator = torch.Generator().manual_seed(args.seed)
    print(f"# torch {torch.__version__}, {threads} thread(s), OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}, "
          f"{len(train_images)} training images in {batches} batches of {args.batch_size}, "
          f"load average {[round(v, 2) for v in os.getloadavg()]}", flush=True)

    wall = train_seconds = wait_seconds = 0.0
    steps = images_seen = 0
    test_loss = test_acc = 0.0
    for epoch in range(1, args.epochs + 1):
        epoch_start = time.perf_counter()
        loss_sum, correct, seen, epoch_wait = 0.0, 0, 0, 0.0
        wait_start = time.perf_counter()
        for batch, (x, y) in enumerate(
                train_batches(torch, train_images, train_labels, args.batch_size, args.augment, generator), 1):
            epoch_wait += time.perf_counter() - wait_start
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            loss_sum += float(loss) * len(y)
            correct += correct_targets(logits.detach(), y)
            seen += len(y)
            steps += 1
            progress(epoch, args.epochs, batch, batches, loss_sum / seen, correct / seen, seen,
                     time.perf_counter() - epoch_start)
            wait_start = time.perf_counter()
        epoch_seconds = time.perf_counter() - epoch_start
        train_seconds += epoch_seconds
        wait_seconds += epoch_wait
        images_seen += seen
        test_loss, test_acc = evaluate(torch, model, test_images, test_labels)
        print(f"epoch {epoch}/{args.epochs}: train loss {loss_sum / seen:.4f}, train acc {correct / seen:.4f}, "
              f"test loss {test_loss:.4f}, test acc {test_acc:.4f}, {epoch_seconds:.1f} s, "
              f"{seen / epoch_seconds:.0f} img/s", flush=True)
        wall += time.perf_counter() - epoch_start

    images_per_s = images_seen / train_seconds
    step_ms = 1000.0 * (train_seconds - wait_seconds) / steps
    data_wait_pct = 100.0 * wait_seconds / train_seconds
    print(f"summary: test loss {test_loss:.4f}, test accuracy {test_acc:.4f} after {args.epochs} epoch(s), "
          f"wall {wall:.1f} s, {images_per_s:.0f} img/s, step {step_ms:.1f} ms, "
          f"data wait {data_wait_pct:.1f}% of training time")
    print(f"result test_acc={test_acc:.4f} epochs={args.epochs} wall_s={wall:.1f} images_per_s={images_per_s:.0f} "
          f"step_ms={step_ms:.2f} data_wait_pct={data_wait_pct:.1f} model=resnet20 framework=torch "
          f"threads={threads}")


if __name__ == "__main__":
    main()
