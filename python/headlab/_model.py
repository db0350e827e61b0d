"""headlab.Model: a checkpoint's model in the C++ engine, driven the way
TransformerLens's HookedTransformer is (docs/python.md)."""
import inspect
import json
import os
from collections.abc import Mapping

import numpy as np

from . import _core, _tokens
from ._cache import ActivationCache
from ._metric_gradient import seed_function
from ._names import get_act_name, is_copy_point, short_or_full
from ._targets import mean_loss, token_losses, warn_if_not_next_token
from ._tl_config import config
from ._tl_circuits import TLCircuits
from ._tl_weights import TLWeights


def load(path):
    """A run folder (its checkpoint.safetensors) or any checkpoint file, a
    snapshot from a run's snapshots/ folder included -> Model."""
    return Model(_core.load(os.fspath(path)))



_HOOKS = ("hooks act on one call, never stay attached: pass fwd_hooks=[(name, fn)] to run_with_hooks, "
          "run_with_cache or gradients (TransformerLens's `with model.hooks(...)`: run_with_cache(tokens, "
          "fwd_hooks=...))")
_CPU = ("a headlab model runs on the CPU, in C++: nothing to move (model.cfg.device is 'cpu'; torch tensors passed "
        "in are read through .cpu())")
_COPIES = ("the copy points (hook_attn_in, hook_q_input, hook_k_input, hook_v_input, hook_mlp_in) are computed in "
           "any pass that names them: run_with_cache(tokens, names=[...]) or fwd_hooks=[...]")
_TOKENS = "headlab models read token ids only, with no tokenizer: pass an int array [B, T] or a list of lists"
_ELSEWHERE = {
    "hooks": _HOOKS, "add_hook": _HOOKS, "reset_hooks": _HOOKS,
    "to_tokens": _TOKENS, "to_string": _TOKENS, "to_str_tokens": _TOKENS, "tokenizer": _TOKENS,
    "state_dict": "model.params (name -> numpy array), or model.to_torch().state_dict()",
    "load_state_dict": "weights never change in place; model.with_params(state_dict) returns a new model",
    "blocks": "read weights from model.params['blocks.0.attn.q.weight'] ... or model.W_Q ...; "
              "model.to_torch().blocks for torch modules",
    "unembed": "model.W_U and model.b_U: logits = cache['ln_final.hook_normalized'] @ W_U + b_U",
    "ln_final": "cache['ln_final.hook_normalized'] is its output; cache.apply_ln_to_stack(stack) applies it frozen "
                "at the run's scale (without its bias, model.params['ln_f.bias'])",
    "embed": "model.W_E[tokens], or cache['hook_embed']",
    "pos_embed": "model.W_pos[:T], or cache['hook_pos_embed']",
    "to": _CPU, "cuda": _CPU, "cpu": _CPU,
    "eval": "a headlab.Model only runs inference (no dropout, no training mode): nothing to switch",
    "set_use_attn_result": "blocks.{l}.attn.hook_result is there whenever a hook or the cache names it "
                           "(run_with_cache caches it by default)",
    "set_use_split_qkv_input": _COPIES, "set_use_attn_in": _COPIES, "set_use_hook_mlp_in": _COPIES,
    "hook_dict": "model.hook_names() lists the hook points", "mod_dict": "model.hook_names() lists the hook points",
    "generate": "no sampling: a headlab model predicts its task's classes at each position (model(tokens) gives "
                "their logits), which need not be the next token",
    "loss_fn": "model(tokens, return_type='loss', targets=...) (loss_per_token=True for each position's)",
}


def _called_as_transformer_lens_would(fn):
    """fn as headlab calls a hook, fn(activation, hook). TransformerLens calls
    fn(activation, hook=hook), which a hook written `def fn(x, *, hook)`
    needs; every other form takes the hook second either way."""
    try:
        hook = inspect.signature(fn).parameters.get("hook")
    except (TypeError, ValueError):  # a callable without a signature (a builtin): positional
        return fn
    if hook is not None and hook.kind is inspect.Parameter.KEYWORD_ONLY:
        return lambda activation, name: fn(activation, hook=name)
    return fn

class Model(TLWeights, TLCircuits):
    """The model of one checkpoint. Its weights never change: hooks and
    patches act on one forward pass at a time, and `with_params` makes
    another Model with some of them replaced. TransformerLens's weight
    names (W_Q, W_OV, ...) come from TLWeights (_tl_weights.py), its
    all_composition_scores and tokens_to_residual_directions from
    TLCircuits (_tl_circuits.py)."""

    def __init__(self, core_model):
        if not isinstance(core_model, _core.Model):
            raise TypeError(f"headlab.Model wraps a loaded checkpoint, got {type(core_model).__name__}: "
                            "use headlab.load(path) with a run folder or a checkpoint")
        self._core = core_model
        self.spec = json.loads(core_model.spec_json)
        if self.spec["attn_only"]:
            # No MLP: its width and activation (kept in the checkpoint, whose
            # readers need them) are no part of this model.
            self.spec.update(d_ff=None, activation=None)
        self.config = json.loads(core_model.config_json)
        self.cfg = config(self.spec)  # TransformerLens's names: cfg.n_layers, cfg.d_head, cfg.n_ctx ...
        # A model made by with_params is held by no file until it is saved.
        self.path = None if core_model.edited else core_model.path
        self.task = core_model.task
        self.step = core_model.step
        # Where the weights came from (what save records), for a model made by
        # with_params or read from a checkpoint one was saved to; else None.
        self.edited = json.loads(core_model.edited_json) if core_model.edited_json else None
        self._params = None

    def __getattr__(self, name):
        """HookedTransformer's attributes that headlab has under another form
        (only called for a name the model lacks): an AttributeError saying
        what to use."""
        prop = getattr(type(self), name, None)
        if isinstance(prop, property):  # a property's own AttributeError (W_in of an attn-only model) led here:
            return prop.fget(self)      # raise it again, with its message
        if name in _ELSEWHERE:
            raise AttributeError(f"headlab.Model has no {name} (TransformerLens's): {_ELSEWHERE[name]}")
        raise AttributeError(f"'Model' object has no attribute {name!r}")

    def __reduce__(self):
        """Pickled as the checkpoint file its weights were read from (an
        edit's: its source's), with that file's size and hash as read, plus
        the parameters an edit replaced: unpickling reads the file again and
        refuses it if it has changed since."""
        path, size, digest = self._core.source_file
        replaced = {name: np.array(self.params[name]) for name in (self.edited or {}).get("replaced", [])}
        return _unpickle, (path, size, digest, replaced, self.path)

    def __deepcopy__(self, memo):
        """The same weights (they never change), its own attributes."""
        twin = Model(self._core)
        twin.path = self.path
        return twin

    def __repr__(self):
        s = self.spec
        kind = "attn-only " if s["attn_only"] else ""
        where = self.path
        if where is None:
            nothing = "" if self.edited["replaced"] else ", nothing replaced"
            where = f"edited from {self.edited['source']['path']}{nothing}"
        layers = f"{s['layers']} layer{'' if s['layers'] == 1 else 's'}"
        heads = f"{s['heads']} head{'' if s['heads'] == 1 else 's'}"
        return (f"<headlab.Model {where}: {kind}{layers} x {heads}, d_model {s['d_model']}, "
                f"vocab {s['vocab']}, {s['max_seq_len']} positions, step {self.step}>")

    @property
    def threads(self):
        """The threads this model's calls run on: headlab.set_num_threads's
        count, or by default the one `headlab analyze` picks for its run (1
        below 10 GFLOP per training step; docs/python.md, "Threads")."""
        return self._core.threads

    @property
    def params(self):
        """name -> numpy array, the checkpoint's names and PyTorch layouts
        (docs/model.md); copies, read-only."""
        if self._params is None:
            params = self._core.params()
            for array in params.values():
                array.setflags(write=False)
            self._params = params
        return self._params

    def padded(self, tokens, lengths=None):
        """(ids [B, T], lengths [B] or None): the checked array a call runs;
        sequences of different lengths (a list of lists) are padded at their
        end with token 0, and `lengths` marks the real tokens of an array."""
        return _tokens.padded(tokens, self.spec, lengths)

    def __call__(self, tokens, lengths=None, *, return_type="logits", targets=None, loss_per_token=False):
        """logits [B, T, classes] of the tokens [B, T] (or of sequences of
        different lengths, padded and masked: docs/python.md). return_type,
        as TransformerLens's: "logits", "loss" (the mean cross-entropy over
        the targets != -1, training's loss; targets default to the next
        token), "both" ((logits, loss)) or None. loss_per_token=True makes the
        loss each position's cross-entropy [B, T], NaN where no target."""
        _check_return_type(return_type, targets, loss_per_token, "model(...)")
        ids, lengths = self.padded(tokens, lengths)
        return self._returned(self._core.forward(ids, lengths), return_type, tokens, targets, ids, lengths,
                              loss_per_token, "model(...)")

    def _returned(self, logits, return_type, tokens, targets, ids, lengths, loss_per_token, who):
        """What return_type asks of a pass's logits."""
        if return_type == "logits":
            return logits
        if return_type is None:
            return None
        if targets is None:
            warn_if_not_next_token(self, who)
        ys = _tokens.padded_targets(targets, ids, lengths, self.spec, _tokens.ragged(tokens, lengths))
        loss = token_losses(logits, ys) if loss_per_token else mean_loss(logits, ys)
        return loss if return_type == "loss" else (logits, loss)

    def hook_names(self):
        """Every hook point of this model, in forward order (TransformerLens's names)."""
        return list(self._core.hook_names())

    def _every_point(self):
        """What names=None caches and differentiates: every hook point but the
        copies TransformerLens computes only when asked (hook_attn_in,
        hook_q_input, hook_k_input, hook_v_input, hook_mlp_in; named, they
        come too)."""
        return [n for n in self.hook_names() if not is_copy_point(n)]

    def _check_names(self, names):
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"hook names are strings, got {name!r}")
            try:
                self._core.check_hook_name(name)
            except ValueError as e:  # the C++ message names the nearest valid names
                raise KeyError(str(e)) from None

    def _select(self, names):
        """A name, a list of names or a predicate name -> bool -> the checked list of names."""
        if callable(names):
            return [n for n in self.hook_names() if names(n)]
        if isinstance(names, str) or _is_short_name(names):
            names = [names]
        elif isinstance(names, (list, tuple, set, frozenset)):
            names = list(names)
        else:
            raise TypeError(f"hook names are strings (a name, a list of them, or a predicate name -> bool), "
                            f"got {names!r}")
        names = [get_act_name(*n, layers=self.spec["layers"]) if _is_short_name(n) else
                 short_or_full(n) if isinstance(n, str) else n for n in names]
        self._check_names(names)
        return names

    def run_with_cache(self, tokens, names=None, lengths=None, *, names_filter=None, return_type="logits",
                       targets=None, loss_per_token=False, fwd_hooks=(), remove_batch_dim=False):
        """(logits, cache): cache maps each hook name (but TransformerLens's
        copy points, hook_q_input ..., which come when named) or only those in
        `names`, a list of names or a predicate name -> bool (TransformerLens's
        `names_filter=` is the same), to its activation as numpy;
        an ActivationCache, a dict with TransformerLens's methods
        (stack_head_results, decompose_resid, logit_attrs, ...) and short
        names (cache["pattern", 0]). fwd_hooks as for run_with_hooks: the
        cache then holds what flows on after them (TransformerLens's
        `with model.hooks(...): model.run_with_cache(...)`). return_type as
        for model(...). remove_batch_dim=True, for a batch of one sequence
        (a ValueError naming the batch size otherwise), drops the batch axis of
        every cached array (not of the logits), as TransformerLens's does."""
        if names_filter is not None:
            if names is not None:
                raise TypeError("run_with_cache: give names or names_filter (TransformerLens's name for it), not both")
            names = names_filter
        _check_return_type(return_type, targets, loss_per_token, "run_with_cache")
        ids, lengths = self.padded(tokens, lengths)
        if remove_batch_dim and ids.shape[0] != 1:
            # TransformerLens's run_with_cache would keep the first sequence's
            # activations without a word (its cache.remove_batch_dim() refuses).
            raise ValueError(f"run_with_cache: remove_batch_dim=True takes a batch of one sequence, got a batch of "
                             f"{ids.shape[0]}; cache one sequence (tokens[i:i + 1]) or keep the batch axis "
                             f"(remove_batch_dim=False)")
        keep = self._every_point() if names is None else self._select(names)
        hooked, call = self._hooks(fwd_hooks)
        logits, cache = self._core.run(ids, keep, hooked, call, lengths)
        out = self._returned(logits, return_type, tokens, targets, ids, lengths, loss_per_token, "run_with_cache")
        cache = ActivationCache(self, cache)
        return out, (cache.remove_batch_dim() if remove_batch_dim else cache)

    def run_with_hooks(self, tokens, fwd_hooks=(), lengths=None, *, return_type="logits", targets=None,
                       loss_per_token=False, bwd_hooks=()):
        """logits with hooks: fwd_hooks = [(name, fn), ...], fn(activation, hook)
        returning None (keep it, or the array edited in place) or an array (or a
        torch tensor) of the same shape that replaces the activation downstream.
        `hook` is the hook point's name, a str that also has TransformerLens's
        hook.name and hook.layer(). A name may be a predicate name -> bool (the
        hook runs at every point it accepts), as TransformerLens's. return_type
        as for model(...). bwd_hooks (TransformerLens's backward hooks) are
        refused, naming model.gradients."""
        if bwd_hooks:
            raise TypeError("run_with_hooks: headlab runs no backward hooks; model.gradients(tokens, targets, names) "
                            "(or metric=fn) returns the gradient at each named hook point, and takes fwd_hooks=")
        _check_return_type(return_type, targets, loss_per_token, "run_with_hooks")
        ids, lengths = self.padded(tokens, lengths)
        hooked, call = self._hooks(fwd_hooks)
        logits, _ = self._core.run(ids, [], hooked, call, lengths)
        return self._returned(logits, return_type, tokens, targets, ids, lengths, loss_per_token, "run_with_hooks")

    def _hooks(self, fwd_hooks):
        """(hooked names, call(name, activation)) of fwd_hooks, checked."""
        if isinstance(fwd_hooks, tuple) and len(fwd_hooks) == 2 and callable(fwd_hooks[1]) and \
                isinstance(fwd_hooks[0], str):
            raise ValueError(f"fwd_hooks: expected a list of (name, function) pairs, got one pair: write "
                             f"fwd_hooks=[({fwd_hooks[0]!r}, fn)]")
        hooks = {}
        for entry in fwd_hooks:
            try:
                name, fn = entry
            except (TypeError, ValueError):
                raise ValueError(f"fwd_hooks: expected (name, function) pairs, got {entry!r}") from None
            if not callable(fn):
                raise TypeError(f"fwd_hooks: the hook for {name!r} is not callable: {fn!r}")
            chosen = self._select(name)
            if callable(name) and not chosen:
                raise ValueError(f"fwd_hooks: the predicate {name!r} accepts no hook point of this model "
                                 "(model.hook_names() lists them)")
            for point in chosen:
                hooks.setdefault(point, []).append(_called_as_transformer_lens_would(fn))

        def call(name, activation):
            fns, hook = hooks[name], HookName(name)
            for i, fn in enumerate(fns):
                out = _from_torch(fn(activation, hook))
                _check_not_whole_numbers(name, out)
                _check_not_masked(name, out)
                if out is not None:
                    activation = out if i == len(fns) - 1 else _writable_copy(out, activation)
            return activation

        return list(hooks), (call if hooks else None)

    def gradients(self, tokens, targets=None, names=None, lengths=None, *, metric=None, grad_logits=None,
                  fwd_hooks=()):
        """name -> the gradient at each named hook point (a list of names, a
        predicate name -> bool, or None: every point but the copy points
        hook_q_input ..., as run_with_cache's), as an ActivationCache
        (grads["z", 0]), of one of:
        - the loss against `targets`: the mean cross-entropy over the targets
          != -1, as in training;
        - metric(logits) -> one number, a function of the logits as a torch
          tensor [B, T, classes] (TransformerLens's metric; needs torch), e.g.
          `lambda l: (l[:, -1, a] - l[:, -1, b]).mean()`;
        - the metric given by its gradient at the logits, grad_logits
          [B, T, classes] (numpy, no torch needed).
        What attribution patching reads. Padded positions' logits get no
        gradient. fwd_hooks as for run_with_hooks: the gradients are then the
        hooked pass's (an ablated or patched model's), each at what flows on
        from its point; the entries a hook changes are constants (no gradient
        flows upstream through them, as a detached patch in TransformerLens),
        those it leaves pass it on. One forward and one backward pass; the
        weights are never touched."""
        ragged = _tokens.ragged(tokens, lengths)
        ids, lengths = self.padded(tokens, lengths)
        names = self._every_point() if names is None else self._select(names)
        hooked, call = self._hooks(fwd_hooks)
        if metric is not None and grad_logits is not None:
            raise ValueError("gradients: give metric= or grad_logits=, not both")
        if metric is not None or grad_logits is not None:
            if targets is not None:
                raise ValueError("gradients: targets= are the loss's; with metric= or grad_logits= the metric is "
                                 "yours, so leave targets out (a metric reads the targets it needs itself)")
            if metric is not None and not callable(metric):
                raise TypeError(f"gradients: metric must be a function logits -> one number, got {metric!r:.100}")
            seed = seed_function(metric, grad_logits, lengths)
            grads = self._core.gradients(ids, None, names, lengths, seed, hooked, call)
        else:
            if targets is None:
                raise ValueError("gradients: give targets= (the loss's gradient: class ids of the tokens' shape, -1 "
                                 "where a position has none), metric= (a function of the logits, differentiated "
                                 "by torch) or grad_logits= (dMetric/dlogits)")
            ys = _tokens.padded_targets(targets, ids, lengths, self.spec, ragged)
            grads = self._core.gradients(ids, ys, names, lengths, None, hooked, call)
        return ActivationCache(self, grads, made_by="gradients")

    def head_circuits(self, layer, head):
        """One head's circuits over tokens, the matrices behind heads.json's
        copying score (docs/head-metrics.md, "Circuits from the weights"):
        "qk" [V, V] (query token x key token, the direct path's pre-softmax
        score), "qk_pos" [T_max, T_max] (query position x key position), "ov"
        [V, C] (attended token x logit), "copying" (the share of OV's positive
        eigenvalue mass, None when classes != vocab), float64, each LayerNorm
        folded in as its centering and scale ("layernorm_folded"), biases and
        MLPs left out ("mlp_ignored"). A negative layer or head counts from
        the end, as cache["pattern", -1] does."""
        for what, value in (("layer", layer), ("head", head)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"head_circuits: the {what} is an int, got {value!r}")
        layer, head = int(layer), int(head)
        layers, heads = self.spec["layers"], self.spec["heads"]
        # Only within range: an index past either end keeps its own value for the error.
        return self._core.head_circuits(layer + layers if -layers <= layer < 0 else layer,
                                        head + heads if -heads <= head < 0 else head)

    def task_batch(self, corrupted=False):
        """The batch the run's own head analysis reads, as headlab.analyze's
        keywords: tokens, targets, lengths, patterns (each the task's mask
        [B, T, T] with its definition), roles and sources. So
        `headlab.analyze(model, **model.task_batch())` gives the run's
        heads.json records, and a pattern or role of your own is one more
        entry. The run's task, split and seed; a --data run's file, checked
        unchanged.

        corrupted=True adds `corrupted` [B, T]: the task's corruption of the
        tokens (`headlab tasks` says what it changes), drawn as `headlab
        analyze RUN --patch` draws it. So `headlab.analyze(model,
        **model.task_batch(corrupted=True))` gives that command's records
        (ablations and patching included), and `headlab.patching`'s grids
        can patch into the same corrupted run: `patching.head_out(model,
        b["tokens"], b["corrupted"], targets=b["targets"], lengths=b["lengths"])`."""
        if not isinstance(corrupted, (bool, np.bool_)):
            raise TypeError(f"task_batch: corrupted is True or False, got {corrupted!r}")
        batch = self._core.task_batch(corrupted=bool(corrupted))
        # int64 ids, as torch takes them, and roles as analyze's dict role -> pattern.
        for key in ("tokens", "targets", "lengths", "corrupted"):
            if batch.get(key) is not None:
                batch[key] = batch[key].astype(np.int64)
        batch["roles"] = dict(batch["roles"])
        return batch

    def to_torch(self):
        """A torch.nn.Module with the checkpoint's parameter names that computes
        the same logits (docs/model.md); needs torch. Its state_dict() goes
        back through with_params."""
        from ._torch import to_torch

        return to_torch(self.spec, self.params)

    def with_params(self, params):
        """A new Model whose parameters are this one's with those in `params`
        (name -> numpy array or torch tensor, e.g. a dict from model.params
        or module.state_dict()) replaced; this model is left as it was. Each
        value is checked (a known name, the parameter's shape, a float dtype,
        finite values) and copied: changing the array afterwards changes
        nothing. float64 values are rounded to the model's float32."""
        if not isinstance(params, Mapping):
            raise TypeError(f"with_params takes a dict name -> array (model.params, module.state_dict()), "
                            f"got {type(params).__name__}")
        return Model(self._core.with_params({name: _as_array(name, value) for name, value in params.items()}))

    def save(self, path, *, overwrite=False):
        """Writes the model as a checkpoint that headlab.load, `headlab analyze`
        and `headlab eval` read: its source checkpoint's config, task, step
        and data file, and `edited` (where the weights came from, which
        parameters were replaced). Refuses, writing nothing: the source
        checkpoint itself, an existing file unless overwrite=True, anything
        but a regular file, a path inside a run or sweep folder."""
        if not isinstance(overwrite, (bool, np.bool_)):  # "no" is truthy: never replace a file on it
            raise TypeError(f"save: overwrite must be True or False, got {overwrite!r}")
        # What load, analyze and eval read as a checkpoint (a folder, a FIFO ... the binding names).
        if not os.fspath(path).endswith(".safetensors") and (os.path.isfile(path) or not os.path.lexists(path)):
            raise ValueError(f"save: {os.fspath(path)!r} does not end in .safetensors, which headlab analyze, eval "
                             "and headlab.load take a checkpoint file by; name it like edits/no-L1H0.safetensors")
        self._core.save(os.fspath(path), bool(overwrite))
        # The file now holds this model: its path, as headlab.load of it would give.
        self.path = os.path.abspath(os.fspath(path))
        return self.path


def _unpickle(path, size, digest, replaced, saved_as):
    model = load(path)
    if model._core.source_file[1:] != (size, digest):
        raise ValueError(f"unpickling a headlab.Model: its checkpoint {path} has changed since it was read (size "
                         f"{size}, hash {digest:016x} then; size {model._core.source_file[1]}, hash "
                         f"{model._core.source_file[2]:016x} now), so its weights are gone; load the model again")
    if replaced:
        model = model.with_params(replaced)
    model.path = saved_as
    return model


class HookName(str):
    """The hook point's name as a hook receives it: a str, with
    TransformerLens's HookPoint attributes hook.name and hook.layer(), so
    that hooks written for TransformerLens run as they are."""

    @property
    def name(self):
        return str(self)

    def layer(self):
        """The block of a block's hook point (blocks.{l}....); a ValueError for
        the others (hook_embed, ln_final...), as TransformerLens's."""
        parts = self.split(".")
        if parts[0] != "blocks":
            raise ValueError(f"{self} is not a block's hook point: it has no layer")
        return int(parts[1])


def _is_short_name(name):
    """TransformerLens's short form of a hook name: ("pattern", 0), ("scale",
    1, "ln2"), ("embed",); not a tuple of full names ("hook_embed",
    "blocks.0.attn.hook_z"), which is a list of names."""
    if not (isinstance(name, tuple) and 1 <= len(name) <= 3 and isinstance(name[0], str)):
        return False
    if "." in name[0] or name[0].startswith("hook_"):
        return False
    layer = name[1] if len(name) > 1 else None
    return layer is None or (isinstance(layer, (int, np.integer)) and not isinstance(layer, bool))


def _check_return_type(return_type, targets, loss_per_token, who):
    """return_type as TransformerLens's; targets and loss_per_token only where
    a loss reads them (else they would be dropped without a word), checked
    before the pass."""
    if return_type not in ("logits", "loss", "both", None):
        raise ValueError(f"{who}: return_type must be 'logits', 'loss', 'both' or None, got {return_type!r}")
    if not isinstance(loss_per_token, (bool, np.bool_)):
        raise TypeError(f"{who}: loss_per_token must be True or False, got {loss_per_token!r}")
    for given, what in ((targets is not None, "targets="), (loss_per_token, "loss_per_token=True")):
        if given and return_type in ("logits", None):
            raise ValueError(f"{who}: only a loss reads {what}, and return_type={return_type!r} computes none: "
                             "pass return_type='loss' or 'both' (or leave it out)")


def _from_torch(value):
    """A hook's return as numpy: a torch tensor (TransformerLens's hooks
    compute in torch) through .numpy(), detached; anything else as it is,
    for the binding to check."""
    if type(value).__module__.split(".")[0] == "torch" and hasattr(value, "detach"):
        value = value.detach().cpu()
        try:
            return value.numpy()
        except TypeError:  # bfloat16 and other dtypes numpy lacks: the binding casts float32 anyway
            return value.float().numpy()
    return value


def _check_not_whole_numbers(name, out):
    """A hook's integer or bool array is refused, not cast: one in place of
    an activation is almost surely a bug (np.ones(shape, dtype=int), a mask
    returned instead of applied). Checked at each hook, so that none in a
    chain hands the next one whole numbers."""
    if isinstance(out, np.ndarray) and out.dtype.kind in "biu":
        raise ValueError(f"the hook at {name} returned values of dtype {out.dtype}; a hook returns None or float "
                         f"values (integers or bools in place of the activation are almost surely a bug): return "
                         f".astype(np.float32) of a numpy array, or .float() of a torch tensor, if whole numbers are "
                         f"what you mean")


def _check_not_masked(name, out):
    """A hook's masked array is refused, as with_params refuses one: the
    binding would read its data, masked entries included, and drop the mask."""
    if isinstance(out, np.ma.MaskedArray):
        raise TypeError(f"the hook at {name} returned a masked array; an activation has no mask (its masked "
                        f"entries would flow on as they are): return .filled(value) or .data of it")


def _writable_copy(out, like):
    """A hook's replacement as the next hook at its point receives it: a writable
    copy of the activation's dtype, as the first hook's was (a returned cache
    array is read-only). One that does not fit stays as it is, for the binding
    to name."""
    if isinstance(out, np.ndarray) and out.shape == like.shape and out.dtype.kind == "f":
        return np.array(out, dtype=like.dtype)
    return out


def _as_array(name, value):
    """A numpy array of `value`; a torch tensor through .numpy() (torch is
    never imported here: a tensor's type says what it is)."""
    if type(value).__module__.split(".")[0] == "torch" and hasattr(value, "detach"):
        if getattr(value, "is_meta", False):
            raise ValueError(f"with_params: {name!r} is a torch meta tensor, which holds no data (a shape and a "
                             "dtype only); give a tensor with values (module.to_empty(device='cpu') and load them)")
        if not value.is_floating_point():  # torch's own conversion, not numpy's .astype
            raise TypeError(f"with_params: {name!r} is a torch tensor of dtype {value.dtype}; a parameter takes "
                            "float16, float32 or float64 values: convert it with .float()")
        try:
            return value.detach().cpu().numpy()
        except TypeError as e:  # bfloat16 and other dtypes numpy lacks
            raise TypeError(f"with_params: {name!r} is a torch tensor of dtype {value.dtype}, which numpy cannot hold "
                            f"({e}); convert it with .float()") from None
    if isinstance(value, np.ndarray):
        return value
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as e:  # a ragged list
        raise TypeError(f"with_params: {name!r} is no array ({e}); give a numpy array of the parameter's shape") from None


def _as_model(model):
    from ._run import Run  # here: _run reads this module

    if isinstance(model, Model):
        return model
    if isinstance(model, Run):
        return model.model()
    if isinstance(model, (str, os.PathLike)):
        return load(model)
    raise TypeError(f"expected a headlab.Model, a headlab.Run or a path, got {type(model).__name__}")
