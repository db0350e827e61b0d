"""TransformerLens's circuit helpers on headlab.Model: all_composition_scores
(every head pair's Q, K or V composition, [L, h, L, h], heads.json's numbers)
and tokens_to_residual_directions (the unembedding's direction of a class, for
a logit difference read off a normalized stack). docs/python.md, "Weights"."""
import numpy as np

_MODES = {"q": "q", "k": "k", "v": "v"}


class TLCircuits:
    """Mixed into headlab.Model beside TLWeights."""

    def _composition(self):
        """The C++ analysis's composition of every pair (analysis/composition.h),
        computed once per model: its weights never change."""
        found = self.__dict__.get("_composition_cache")
        if found is None:
            found = self.__dict__["_composition_cache"] = self._core.composition()
        return found

    def all_composition_scores(self, mode):
        """[L, h, L, h] float64: scores[l1, h1, l2, h2] is how much head h2 of
        layer l2 reads, through its queries (mode "Q"), keys ("K") or values
        ("V"), what head h1 of layer l1 writes; 0 where l1 >= l2. As
        TransformerLens's all_composition_scores: ||W_QK,b W_OV,a|| /
        (||W_QK,b|| ||W_OV,a||) (Frobenius; for "K", Elhage et al.'s), in [0, 1].
        Each LayerNorm is folded in as its centering and scale, biases and
        MLPs left out, as heads.json's circuits.composition (the same C++
        code, so the same numbers); model.composition_baseline is what random
        matrices of these shapes score. Without LayerNorm these are exactly
        TransformerLens's formula on model.W_OV and model.W_QK."""
        if not isinstance(mode, str) or mode.lower() not in _MODES:
            raise ValueError(f"all_composition_scores: mode is 'Q', 'K' or 'V' (the reader's queries, keys or "
                             f"values), got {mode!r}")
        return self._composition()[_MODES[mode.lower()]].copy()

    @property
    def composition_baseline(self):
        """The mean composition score of independent Gaussian matrices of
        this model's shapes (heads.json's circuits.composition_baseline): a
        score well above it is a composition the training made. None with
        one layer (no pair to compose)."""
        return self._composition()["baseline"]

    def tokens_to_residual_directions(self, tokens):
        """The residual-stream direction each class's logit reads, W_U[:, c]
        (head.weight's row c) as float64: [d] for an int, [*shape, d] for an
        array of class ids. As TransformerLens's (ids only, no strings): the
        logit difference a normalized stack writes is
        (stack * (dirs(a) - dirs(b))).sum(-1), without head.bias."""
        ids = np.asarray(tokens)
        if ids.dtype.kind not in "iu" or ids.dtype == bool:
            raise ValueError(f"tokens_to_residual_directions: class ids (ints) are needed, got dtype {ids.dtype} "
                             "(headlab has no tokenizer)")
        count = self.spec["classes"]
        if ids.size and (ids.min() < 0 or ids.max() >= count):
            bad = np.argwhere((ids < 0) | (ids >= count))[0] if ids.ndim else []
            raise ValueError(f"tokens_to_residual_directions: class {int(ids[tuple(bad)])} is outside [0, {count})"
                             + (f" (at {bad.tolist()})" if ids.ndim else ""))
        return self.params["head.weight"].astype(np.float64)[ids]
