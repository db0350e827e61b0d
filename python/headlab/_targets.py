"""The next-token default of `targets`, and the warning when a model was
trained on other targets: its numbers would then measure a prediction the
model never learned (a loss gap "restored" at 400%, say)."""
import os
import sys
import warnings

import numpy as np

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


def next_token_share(model):
    """(differing, scored, unscored): of the targets of the model's own
    analysis batch (model.task_batch()), how many are not the next token and
    how many there are, and how many positions the next-token default would
    score that the task leaves without a target (induction's filler, say);
    None when that batch cannot be made (a checkpoint without its run's data
    file, say). Computed once per model."""
    if not hasattr(model, "_next_token_share"):
        try:
            batch = model.task_batch()
        except Exception:  # no batch, no evidence either way: nothing to warn about
            model._next_token_share = None
            return None
        tokens, targets, lengths = batch["tokens"], batch["targets"], batch["lengths"]
        nxt = np.full(tokens.shape, -1, dtype=np.int64)
        nxt[:, :-1] = tokens[:, 1:]
        if lengths is not None:  # a row's last real token has no next one
            nxt[np.arange(tokens.shape[1]) >= (np.asarray(lengths)[:, None] - 1)] = -1
        scored = targets >= 0
        model._next_token_share = (int((targets[scored] != nxt[scored]).sum()), int(scored.sum()),
                                   int(((nxt >= 0) & ~scored).sum()))
    return model._next_token_share


def warn_if_not_next_token(model, who):
    """Warns (once per call) when `targets` default to the next token for a
    model whose run's targets are something else: other classes, or fewer
    positions than every next token."""
    if model.spec["classes"] != model.spec["vocab"]:
        return  # no next-token default: padded_targets refuses it, naming the classes
    share = next_token_share(model)
    if share is None or (share[0] == 0 and share[2] == 0):
        return
    differing, scored, unscored = share
    if differing:
        what = (f"{differing} of the {scored} targets of this model's own task ({model.task}) are not the next "
                "token, so the numbers measure a prediction it was not trained for")
    else:
        what = (f"this model's own task ({model.task}) scores {scored} of the {scored + unscored} positions the "
                "default scores, so most numbers come from positions it was never trained to predict" if
                unscored > scored else
                f"this model's own task ({model.task}) leaves {unscored} of the {scored + unscored} positions the "
                "default scores without a target, positions it was never trained to predict")
    warnings.warn(f"{who}: targets default to the next token, but {what}; pass targets= "
                  "(model.task_batch()['targets'] are its run's own)", UserWarning, stacklevel=_caller_level())


def _caller_level():
    """warnings.warn's stacklevel of the first frame outside this package, so
    that the warning names the user's line."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == _PACKAGE:
        level, frame = level + 1, frame.f_back
    return level


def _target_log_probs(logits, targets):
    """(log p(target) [B, T] float64, 0 where no target; the mask of targets != -1)."""
    logits = logits.astype(np.float64)
    mask = targets != -1
    shifted = logits - logits.max(axis=-1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    picked = np.take_along_axis(logp, np.where(mask, targets, 0)[..., None].astype(np.int64), axis=-1)[..., 0]
    return picked * mask, mask


def mean_loss(logits, targets):
    """The mean cross-entropy over the targets != -1 (training's loss), in float64."""
    picked, mask = _target_log_probs(logits, targets)
    return float(-picked.sum() / mask.sum())


def token_losses(logits, targets):
    """Each position's cross-entropy [B, T] (float64), NaN where targets == -1
    (padding included): TransformerLens's loss_per_token, at the targets' positions."""
    picked, mask = _target_log_probs(logits, targets)
    return np.where(mask, -picked, np.nan)
