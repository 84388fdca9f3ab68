"""The op set of the kernel IR, grouped by what a renderer has to do with them."""

from __future__ import annotations

from enum import Enum, auto


class Ops(Enum):
    # structure
    SINK = auto()  # src: the STOREs (and BARRIERs) of a kernel; arg: kernel name
    PARAM = auto()  # global buffer; arg: (slot, name, writable); src: (size,) in elements
    VAR = auto()  # int scalar argument; arg: (name, lo, hi)
    SCALAR = auto()  # per-launch scalar value of any dtype (k.scalar); arg: name; never an index, size or bound
    CONST = auto()  # arg: python value
    RANGE = auto()  # src: (end,); arg: (id, kind) — kind in RANGE_KINDS
    REDUCE = auto()  # src: (value, range, ...); arg: the combining op (ADD, MAX, MUL)
    # memory
    DEFINE_LOCAL = auto()  # shared memory; arg: (name, size); dtype: element type
    INDEX = auto()  # src: (buffer, index[, gate]) -> address of one element
    LOAD = auto()  # src: (index,) or (index, default) when the index is gated; optional barrier dep
    STORE = auto()  # src: (index, value); dtype void
    BARRIER = auto()  # src: the stores it orders
    # vectors and conversions
    VECTORIZE = auto()  # src: lanes -> a vector
    GEP = auto()  # src: (vector,); arg: lane
    CAST = auto()
    BITCAST = auto()
    # unary ALU
    NEG = auto(); EXP2 = auto(); LOG2 = auto(); SIN = auto(); SQRT = auto(); RECIP = auto(); TRUNC = auto()
    # binary ALU
    ADD = auto(); SUB = auto(); MUL = auto(); FDIV = auto(); IDIV = auto(); MOD = auto(); MAX = auto()
    CMPLT = auto(); CMPNE = auto(); CMPEQ = auto()
    AND = auto(); OR = auto(); XOR = auto(); SHL = auto(); SHR = auto()
    # ternary ALU
    WHERE = auto(); MULACC = auto()
    # only in the linear form (after lowering)
    SPECIAL = auto()  # GPU index: arg (name "gidx0"/"lidx0", axis); src (extent,)
    ENDRANGE = auto()  # src: (range,)
    DEFINE_ACC = auto()  # accumulator register; src: (initial const,); arg: id
    ASSIGN = auto()  # src: (acc, value): acc = value
    IF = auto()  # src: (cond,)
    ENDIF = auto()  # src: (if,)

    def __repr__(self) -> str:
        return f"Ops.{self.name}"

    __hash__ = object.__hash__  # members are singletons; Enum's hash(name) is a Python call per UOp key hashed


RANGE_KINDS = ("global", "local", "loop", "reduce", "unroll")

UNARY = frozenset({Ops.NEG, Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.TRUNC})
BINARY = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE,
                    Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR})
TERNARY = frozenset({Ops.WHERE, Ops.MULACC})
ALU = UNARY | BINARY | TERNARY
COMPARE = frozenset({Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ})
COMMUTATIVE = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.CMPEQ, Ops.AND, Ops.OR, Ops.XOR})
REDUCE_OPS = frozenset({Ops.ADD, Ops.MAX, Ops.MUL})
