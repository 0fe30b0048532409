"""A PyTorch training step on the CPU, as a user would write one: a small
convolutional network, an optimizer, and a DataLoader whose batches come
from one worker process. Prints 'ready' after the first step, then trains
until killed."""
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

torch.set_num_threads(1)


class Noise(Dataset):
    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(3, 32, 32, generator=g), i % 10


model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                      nn.Flatten(), nn.Linear(32 * 16, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.CrossEntropyLoss()


def step(x, y):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()  # LINE:backward
    opt.step()
    return loss.item()


loader = DataLoader(Noise(), batch_size=32, num_workers=1)
for n, (x, y) in enumerate(loader):
    step(x, y)
    if n == 0:
        sys.stdout.write("ready\n")
        sys.stdout.flush()
