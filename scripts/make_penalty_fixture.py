#!/usr/bin/env python3
"""transformers' RepetitionPenaltyLogitsProcessor on fixed logits: the fixture of
tests/kernels/penalties_transformers_test.cpp (run where transformers is installed, e.g. the
GPU machine; the output is committed).

Usage: python3 scripts/make_penalty_fixture.py OUT.json

Each case: a vocabulary of 512 logits (normal(0, 4), a few exact zeros), a prompt and
generated tokens (with repeats), a penalty; "expected" is the processor's output on the
logits given the context prompt + generated, computed in float32 on the CPU.
"""
import json
import random
import sys

import torch
from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

VOCAB = 512


def main():
    rng = random.Random(4242)
    cases = []
    for penalty in (1.3, 0.7, 2.0):
        logits = [rng.gauss(0.0, 4.0) for _ in range(VOCAB)]
        for i in rng.sample(range(VOCAB), 4):
            logits[i] = 0.0
        logits = torch.tensor(logits, dtype=torch.float32)
        prompt = [rng.randrange(VOCAB) for _ in range(40)]
        generated = [rng.randrange(VOCAB) for _ in range(12)] + prompt[:3]
        context = torch.tensor([prompt + generated])
        out = RepetitionPenaltyLogitsProcessor(penalty)(context, logits[None].clone())[0]
        cases.append({"penalty": penalty, "prompt": prompt, "generated": generated,
                      "logits": logits.tolist(), "expected": out.tolist()})
    with open(sys.argv[1], "w") as f:
        json.dump({"vocab": VOCAB, "source": "transformers RepetitionPenaltyLogitsProcessor",
                   "transformers": __import__("transformers").__version__, "cases": cases}, f)


if __name__ == "__main__":
    main()
