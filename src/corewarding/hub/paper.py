"""What the cards say about the paper: its reference, its BibTeX entry, and one paragraph per reward method."""

from __future__ import annotations

ARXIV_ID = "2508.00410"
PAPER_TITLE = "Co-rewarding: Stable Self-supervised RL for Eliciting Reasoning in Large Language Models"
PAPER_URL = f"https://arxiv.org/abs/{ARXIV_ID}"
AUTHORS = (
    "Zizhuo Zhang",
    "Jianing Zhu",
    "Xinmu Ge",
    "Zihua Zhao",
    "Zhanke Zhou",
    "Xuan Li",
    "Xiao Feng",
    "Jiangchao Yao",
    "Bo Han",
)
LICENSE = "apache-2.0"


def bibtex() -> str:
    """The paper's BibTeX entry (authors as ``Last, First``)."""
    authors = " and ".join(f"{name.split(' ', 1)[1]}, {name.split(' ', 1)[0]}" for name in AUTHORS)
    return (
        "@article{zhang2025corewarding,\n"
        f"  title   = {{{PAPER_TITLE}}},\n"
        f"  author  = {{{authors}}},\n"
        f"  journal = {{arXiv preprint arXiv:{ARXIV_ID}}},\n"
        "  year    = {2025}\n"
        "}"
    )


# Keyed by method name first (ablations), then by the reward a method uses.
METHOD_TEXT = {
    "gt_grpo": (
        "Ground-truth GRPO. A rollout earns 1 when the answer in its last `\\boxed{}` equals the reference answer and "
        "0 otherwise. This baseline uses the dataset's labels; the label-free methods are measured against it."
    ),
    "majority_voting": (
        "Majority-Voting (label-free). The rollouts of a question vote with their final answers, and a rollout earns "
        "1 when its answer is the most common one. The vote takes the place of the missing label."
    ),
    "majority_voting_rephrased": (
        "Majority-Voting trained on the rephrased questions (label-free; an ablation from the paper). It separates "
        "the effect of the rephrased data from that of Co-rewarding-I's cross-view reward."
    ),
    "self_certainty": (
        "Self-Certainty (label-free). The reward is the response's mean self-certainty: how far each next-token "
        "distribution is from uniform (a KL divergence), so responses the model is sure of score higher."
    ),
    "entropy": (
        "Entropy minimisation (label-free). The reward is minus the mean token entropy of the response under the "
        "policy that sampled it."
    ),
    "co_rewarding_1": (
        "Co-rewarding-I (label-free, data side). Every training question comes with a rephrased copy that has the "
        "same answer. The rollouts of each copy are rewarded for matching the majority answer of the other copy's "
        "rollouts, so an answer is reinforced only when two phrasings of the problem agree on it."
    ),
    "co_rewarding_2": (
        "Co-rewarding-II (label-free, model side). A teacher, kept as a slow exponential moving average of the "
        "policy, samples answers to the same question; the policy's rollouts are rewarded for matching the teacher's "
        "majority answer. The teacher lags the policy, which makes it hard for the policy to reward its own drift."
    ),
    "co_rewarding_3": (
        "Co-rewarding-III (label-free; the paper's third method, combining I and II). The policy and a slow "
        "exponential-moving-average teacher both answer each question and its rephrased copy. The policy's rollouts "
        "on one copy are rewarded for matching the teacher's majority answer on the other copy, so a label needs "
        "both a lagging model and a second phrasing to agree with it."
    ),
    "co_rewarding_2_frozen_teacher": (
        "Co-rewarding-II with the teacher frozen at the base model (label-free; the paper's ablation without "
        "reference updates): labels are the majority answer of the unchanged base model's samples."
    ),
}


def method_text(name: str, reward: str | None) -> str:
    """The paragraph for a method (by name, else by its reward), or a plain pointer for an unknown one."""
    if name in METHOD_TEXT:
        return METHOD_TEXT[name]
    if reward and reward in METHOD_TEXT:
        return METHOD_TEXT[reward]
    return f"Method `{name}` (reward `{reward}`); see `configs/method/{name}.yaml` in the corewarding repository."
