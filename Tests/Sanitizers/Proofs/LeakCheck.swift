// What LeakSanitizer reports that is not a leak in our code (the reasons behind Tests/Sanitizers/lsan.supp).
//
//   swiftc -sanitize=address -g Tests/Sanitizers/Proofs/LeakCheck.swift -o /tmp/leak-check
//   /tmp/leak-check plain           # control: a global object holding an array                       clean
//   /tmp/leak-check enum            # a global indirect enum (still reachable from the global)         reported
//   /tmp/leak-check weak            # a global object and a global weak reference to it                clean
//   /tmp/leak-check weak-dropped    # a global object; a weak reference to it made, then dropped       reported
//   /tmp/leak-check empty-file      # FileManager.contents(atPath:) of an empty file, result dropped   reported
//   /tmp/leak-check one-byte-file   # the same with a one-byte file                                    clean
//
// "enum": everything stays reachable from the global until exit, yet LeakSanitizer reports the enum's boxes: Swift
// keeps the case in the spare bits of the box pointer, so the stored word is no address LeakSanitizer recognises.
// "weak-dropped": the side table holding the weak count is reachable only through the object's refcount word, which
// stores its address shifted and flagged; while a weak variable points at it ("weak") it is found, afterwards not.
// "empty-file": a real leak, in swift-foundation: readBytesFromFile mallocs a 4 KiB buffer for a file whose size
// reads 0 and loses it when nothing was read (the Data is empty); one byte read, the buffer goes into the Data.
// scripts/sanitize.sh builds and runs this (SANITIZE_PROOFS=0 skips it) and says so if an outcome ever changes.
import Foundation

indirect enum Tree { case leaf(Int), node([Tree]), name(String) }
final class Object { var payload = [1, 2, 3] }
final class Holder { weak var reference: Object? }

nonisolated(unsafe) var tree: Tree = .leaf(0)
nonisolated(unsafe) var object: Object?
nonisolated(unsafe) var holder: Holder?

let variant = CommandLine.arguments.count > 1 ? CommandLine.arguments[1] : "plain"
switch variant {
case "enum":
    tree = .node([.leaf(1), .name("x" + String(repeating: "y", count: 40)), .node([.leaf(2)])])
case "weak":
    object = Object()
    holder = Holder()
    holder?.reference = object
case "weak-dropped":
    object = Object()
    do {
        let transient = Holder()
        transient.reference = object
    }
case "empty-file", "one-byte-file":
    let path = NSTemporaryDirectory() + "leak-check-\(getpid())"
    _ = FileManager.default.createFile(atPath: path, contents: Data(variant == "empty-file" ? [] : [0x78]))
    let count = FileManager.default.contents(atPath: path)?.count ?? -1
    try? FileManager.default.removeItem(atPath: path)
    print("read \(count) bytes")
default:
    object = Object()
}
print(variant, "done")
