import CBOR

extension CBORValue {
    /// Structural identity with floats compared bit for bit, so a NaN decoded twice is the same value (`==` follows
    /// IEEE 754, where NaN never equals itself, and would make "decodes the same" checks fail on any NaN).
    func isIdentical(to other: CBORValue) -> Bool {
        switch (self, other) {
        case (.float(let a), .float(let b)): return a.bitPattern == b.bitPattern
        case (.array(let a), .array(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.isIdentical(to: $1) }
        case (.map(let a), .map(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.0.isIdentical(to: $1.0) && $0.1.isIdentical(to: $1.1) }
        case (.tag(let ta, let a), .tag(let tb, let b)): return ta == tb && a.isIdentical(to: b)
        default: return self == other
        }
    }
}
