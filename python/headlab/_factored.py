"""FactoredMatrix: TransformerLens's low-rank matrix A @ B kept as its two
factors, in numpy (docs/python.md, "Weights"). model.QK and model.OV are
ones, as TransformerLens's are, so its circuit code runs as written:
(model.W_E @ model.OV[1, 0] @ model.W_U).AB, model.OV[1, 0].eigenvalues,
model.QK.svd()."""
import numpy as np


class FactoredMatrix:
    """A [..., ldim, mdim] @ B [..., mdim, rdim], never formed unless asked
    (.AB, np.asarray). Leading axes broadcast (a head's circuit of every
    layer and head at once). Products with arrays and other FactoredMatrix
    stay factored; .eigenvalues, .svd(), .norm() work on the small
    mdim-sized side, as TransformerLens's do."""

    # numpy hands `array @ factored` to __rmatmul__ instead of treating it as an object.
    __array_ufunc__ = None

    def __init__(self, A, B):
        A, B = np.asarray(A), np.asarray(B)
        if A.ndim < 2 or B.ndim < 2 or A.shape[-1] != B.shape[-2]:
            raise ValueError(f"FactoredMatrix(A, B): A [..., ldim, mdim] and B [..., mdim, rdim] with the same "
                             f"mdim, got shapes {list(A.shape)} and {list(B.shape)}")
        try:
            lead = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
        except ValueError:
            raise ValueError(f"FactoredMatrix(A, B): the leading axes of {list(A.shape)} and {list(B.shape)} do not "
                             f"broadcast") from None
        self.A = np.broadcast_to(A, lead + A.shape[-2:])
        self.B = np.broadcast_to(B, lead + B.shape[-2:])
        self.ldim, self.mdim, self.rdim = A.shape[-2], A.shape[-1], B.shape[-1]
        self.shape = lead + (self.ldim, self.rdim)
        self.ndim = len(self.shape)
        self._svd = None

    def __repr__(self):
        return f"FactoredMatrix: Shape({self.shape}), Hidden Dim({self.mdim})"

    def __array__(self, dtype=None, copy=None):
        return self.AB if dtype is None else self.AB.astype(dtype)

    @property
    def AB(self):
        """The product, [..., ldim, rdim]."""
        return self.A @ self.B

    @property
    def BA(self):
        """B @ A [..., mdim, mdim] (ldim == rdim): its eigenvalues are AB's nonzero ones."""
        if self.ldim != self.rdim:
            raise ValueError(f"FactoredMatrix.BA: the matrix is not square ({self.ldim} x {self.rdim})")
        return self.B @ self.A

    @property
    def T(self):
        return FactoredMatrix(self.B.swapaxes(-1, -2), self.A.swapaxes(-1, -2))

    @property
    def pair(self):
        return self.A, self.B

    def __matmul__(self, other):
        if isinstance(other, FactoredMatrix):
            return (self @ other.A) @ other.B
        other = np.asarray(other)
        if other.ndim < 2:  # a vector: its image, an array
            return self.A @ (self.B @ other)
        return FactoredMatrix(self.A, self.B @ other)

    def __rmatmul__(self, other):
        other = np.asarray(other)
        if other.ndim < 2:
            return (other @ self.A) @ self.B
        return FactoredMatrix(other @ self.A, self.B)

    def __mul__(self, scalar):
        if not np.isscalar(scalar) and np.ndim(scalar) != 0:
            raise TypeError("FactoredMatrix * x: x is a number (an array's product is @)")
        return FactoredMatrix(self.A * scalar, self.B)

    __rmul__ = __mul__

    def __getitem__(self, index):
        """Indexes the leading axes (model.OV[1, 0]: layer 1, head 0); one or two
        more index AB's rows and then columns, an int kept as a slice of one,
        as TransformerLens's."""
        index = index if isinstance(index, tuple) else (index,)
        lead = len(self.shape) - 2
        if len(index) <= lead:
            return FactoredMatrix(self.A[index], self.B[index])
        if len(index) > lead + 2 or any(i is None or i is Ellipsis for i in index):
            raise IndexError(f"FactoredMatrix of shape {self.shape}: index {index!r} (at most {lead + 2} entries, "
                             f"no None or ...)")
        rows, cols = [slice(i, i + 1 or None) if isinstance(i, (int, np.integer)) else i
                      for i in index[lead:]] + [slice(None)] * (lead + 2 - len(index))
        return FactoredMatrix(self.A[index[:lead] + (rows, slice(None))], self.B[index[:lead] + (slice(None), cols)])

    def __setitem__(self, index, value):
        raise ValueError("FactoredMatrix is read-only (its factors are the model's weights): edit them with "
                         "model.with_tl_params({'W_V': ...}) and read the new model's OV")

    def svd(self):
        """(U [..., ldim, k], S [..., k], Vh [..., rdim, k]) with U diag(S) Vh^T = AB:
        TransformerLens's (its Vh is V, note the transpose), from the factors'
        own SVDs, k = min(ldim, mdim, rdim)."""
        if self._svd is None:
            ua, sa, vha = np.linalg.svd(self.A, full_matrices=False)
            ub, sb, vhb = np.linalg.svd(self.B, full_matrices=False)
            middle = sa[..., :, None] * (vha @ ub) * sb[..., None, :]
            um, sm, vhm = np.linalg.svd(middle, full_matrices=False)
            self._svd = ua @ um, sm, vhb.swapaxes(-1, -2) @ vhm.swapaxes(-1, -2)
        return self._svd

    @property
    def U(self):
        return self.svd()[0]

    @property
    def S(self):
        return self.svd()[1]

    @property
    def Vh(self):
        return self.svd()[2]

    @property
    def eigenvalues(self):
        """[..., mdim] complex: BA's eigenvalues, AB's nonzero ones (ldim == rdim)."""
        return np.linalg.eigvals(self.BA)

    def norm(self):
        """The Frobenius norm of AB, [...]."""
        return np.sqrt((self.S ** 2).sum(-1))

    def get_corner(self, k=3):
        """AB[..., :k, :k], computed from the factors' corners."""
        return self.A[..., :k, :] @ self.B[..., :, :k]
