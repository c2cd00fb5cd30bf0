"""Segment-locked advantages on TRL's own multi-turn API, in an environment that is not slca's.

A tiny lending library. The agent looks a book up (`search_catalog`), borrows it (`borrow`) and then
tells the user what happened. Two rewards, one per segment:

- `lending_reward` scores the tool calls: was the requested book borrowed (read from the
  environment's state)?
- `answer_reward` scores the final answer: does it give the due date the library returned?

`SegmentGRPOTrainer` is TRL's `GRPOTrainer` with one change: each reward's group-normalised
advantage goes only to its own segment's tokens (`estimator="slca"`; any of `grpo | gdpo | slca |
toolpo | rltr`). The policy is a tiny Qwen2-architecture model built here from a config, warmed up
on a few gold dialogues so that it calls tools at all, then trained for a few GRPO steps on CPU. (The
pipeline's default policy is SmolLM2-135M-Instruct; this example keeps a tiny one so it runs in seconds.
`slca profile tiny --write params.yaml` puts the pipeline back on its tiny policy too.)

    python examples/trl_environment.py --steps 3 --out runs/trl-example
    slca dashboard --project-dir runs/trl-example      # its per-token advantages (pipeline install)
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import torch
from datasets import Dataset
from transformers import Qwen2Config, Qwen2ForCausalLM
from transformers.utils import get_json_schema
from trl import GRPOConfig

from slca.train.policy import render_chat, train_tokenizer
from slca.trl import SegmentGRPOTrainer, samples_folder_sink

BOOKS = {
    "Dune": "B-17",
    "Emma": "B-23",
    "Ulysses": "B-31",
    "Beloved": "B-42",
    "Rebecca": "B-56",
    "Matilda": "B-64",
    "Persuasion": "B-71",
    "Middlemarch": "B-88",
}
DUE = {book_id: f"2027-01-{10 + k:02d}" for k, book_id in enumerate(BOOKS.values())}


class Library:
    """One rollout's library: TRL calls `reset` with the dataset row, then the agent's tool calls."""

    def __init__(self) -> None:
        self.title = ""
        self.searched: list[str] = []
        self.borrowed: list[str] = []

    def reset(self, title: str = "", **_: object) -> None:
        self.title, self.searched, self.borrowed = title, [], []

    def search_catalog(self, title: str) -> str:
        """Find a book in the catalog.

        Args:
            title: The book's title.
        """
        self.searched.append(title)
        if title not in BOOKS:
            raise ValueError(f"no book titled {title!r}")
        return BOOKS[title]

    def borrow(self, book_id: str) -> str:
        """Borrow a book.

        Args:
            book_id: The catalog id of the book.
        """
        if book_id not in DUE:
            raise ValueError(f"unknown book id {book_id!r}")
        self.borrowed.append(book_id)
        return f"due {DUE[book_id]}"


def lending_reward(environments: list[Library], **_: object) -> list[float]:
    """Tool segment: 1 when exactly the requested book was borrowed, 0.5 when it was only looked up."""
    scores = []
    for env in environments:
        wanted = BOOKS.get(env.title)
        scores.append(1.0 if env.borrowed == [wanted] else 0.5 if env.title in env.searched else 0.0)
    return scores


def answer_reward(completions: list[list[dict]], environments: list[Library], **_: object) -> list[float]:
    """Summary segment: 1 when the final answer gives the due date of the requested book."""
    scores = []
    for completion, env in zip(completions, environments):
        answer = completion[-1].get("content") or "" if completion else ""
        due = DUE[BOOKS[env.title]] if env.title in BOOKS else None
        scores.append(1.0 if due and due in answer else 0.2 if "due" in answer else 0.0)
    return scores


def request(title: str) -> list[dict]:
    return [{"role": "user", "content": f"Please borrow {title} for me."}]


def gold_dialogue(title: str) -> list[dict]:
    book_id, due = BOOKS[title], DUE[BOOKS[title]]

    def call(name: str, arguments: dict) -> dict:
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}],
        }

    return [
        *request(title),
        call("search_catalog", {"title": title}),
        {"role": "tool", "name": "search_catalog", "content": book_id},
        call("borrow", {"book_id": book_id}),
        {"role": "tool", "name": "borrow", "content": f"due {due}"},
        {"role": "assistant", "content": f"Borrowed {title} ({book_id}), due {due}."},
    ]


def tool_schemas() -> list[dict]:
    """The JSON schemas TRL shows the model: built from the environment's tool methods."""
    env = Library()
    return [get_json_schema(env.search_catalog), get_json_schema(env.borrow)]


def tiny_policy(seed: int) -> tuple[Qwen2ForCausalLM, object]:
    """A tokenizer trained on the gold dialogues and a 2-layer Qwen2 model (~0.2 M parameters)."""
    texts = [render_chat(gold_dialogue(t), tool_schemas()) for t in BOOKS]
    tokenizer = train_tokenizer(texts * 4, vocab_size=600, seed=seed, whole_words=list(BOOKS.values()))
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=96,
        intermediate_size=192,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def warm_up(model: Qwen2ForCausalLM, tokenizer: object, steps: int, seed: int) -> float:
    """Plain next-token training on the gold dialogues, so the policy calls tools; returns the last loss."""
    batch = tokenizer.apply_chat_template(
        [gold_dialogue(t) for t in BOOKS], tools=tool_schemas(), padding=True, return_tensors="pt", return_dict=True
    )
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    torch.manual_seed(seed)
    model.train()
    loss = torch.tensor(0.0)
    for _ in range(steps):
        loss = model(**batch, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return float(loss.detach())


def build_trainer(
    out: Path, steps: int, estimator: str = "slca", seed: int = 0, warm_up_steps: int = 400
) -> SegmentGRPOTrainer:
    model, tokenizer = tiny_policy(seed)
    loss = warm_up(model, tokenizer, warm_up_steps, seed)
    print(f"warm-up: {warm_up_steps} steps, loss {loss:.3f}")
    titles = list(BOOKS)
    random.Random(seed).shuffle(titles)
    dataset = Dataset.from_list([{"prompt": request(t), "title": t} for t in titles])
    args = GRPOConfig(
        output_dir=str(out / "checkpoints"),
        max_steps=steps,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=96,
        max_tool_calling_iterations=2,
        learning_rate=5e-4,
        beta=0.0,
        temperature=1.0,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        remove_unused_columns=False,
        seed=seed,
        data_seed=seed,
        dataloader_num_workers=0,
    )
    return SegmentGRPOTrainer(
        model,
        reward_funcs=[lending_reward, answer_reward],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        environment_factory=Library,
        tool_reward="lending_reward",
        summary_reward="answer_reward",
        estimator=estimator,
        sample_sink=samples_folder_sink(out / "models" / f"trl-example-{estimator}" / "samples"),
    )


def main(argv: list[str] | None = None) -> SegmentGRPOTrainer:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="GRPO steps (8 rollouts each).")
    parser.add_argument("--estimator", default="slca", help="grpo | gdpo | slca | toolpo | rltr")
    parser.add_argument("--out", type=Path, default=Path("runs/trl-example"), help="Output folder.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--warm-up-steps",
        type=int,
        default=400,
        help="Next-token steps on the gold dialogues before RL (fewer: the policy calls tools less).",
    )
    args = parser.parse_args(argv)
    trainer = build_trainer(args.out, args.steps, args.estimator, args.seed, args.warm_up_steps)
    trainer.train()
    credit = trainer.last_credit
    print(
        json.dumps(
            {
                "estimator": args.estimator,
                "steps": trainer.state.global_step,
                "r_tool": credit["r_tool"].tolist(),
                "r_sum": credit["r_sum"].tolist(),
                "tool_tokens": int(credit["tool_mask"].sum()),
                "summary_tokens": int(credit["summary_mask"].sum()),
                "samples": str(args.out / "models"),
            }
        )
    )
    return trainer


if __name__ == "__main__":
    main()
