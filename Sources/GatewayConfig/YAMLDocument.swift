internal import CYAML

/// A YAML syntax error at the libyaml problem mark.
struct YAMLSyntaxError: Error, Sendable, Equatable {
    var message: String
    var mark: YAMLMark
}

/// Parses YAML text with libyaml's document API into a `YAMLNode` tree.
///
/// libyaml is used only here. Aliases are expanded into copies, so the tree is bounded: at most
/// `Limits.maxNodes` nodes and `Limits.maxDepth` levels (an alias "bomb" or a recursive alias is a syntax
/// error, never an out-of-memory).
enum YAMLDocument {
    /// Bounds on the expanded tree. A gateway.yml has a few hundred nodes.
    enum Limits {
        static let maxNodes = 100_000
        static let maxDepth = 64
    }

    /// The root node of the single document in `text`; nil when the stream holds no document.
    static func parse(_ text: String) -> Result<YAMLNode?, YAMLSyntaxError> {
        guard let parser = LibYAMLParser(text) else {
            return .failure(YAMLSyntaxError(message: "cannot initialize the YAML parser", mark: .init(line: 1, column: 1)))
        }
        let first: LibYAMLDocument
        switch parser.load() {
        case .failure(let error): return .failure(error)
        case .success(let document): first = document
        }
        guard let root = first.rootIndex else { return .success(nil) }
        switch parser.load() {
        case .failure(let error): return .failure(error)
        case .success(let second):
            if let extra = second.rootIndex {
                return .failure(YAMLSyntaxError(message: "expected a single YAML document",
                                                mark: second.mark(of: extra)))
            }
        }
        var budget = Limits.maxNodes
        return first.convert(root, depth: 0, budget: &budget).map { Optional($0) }
    }
}

/// Owns one `yaml_parser_t` and the bytes it reads; both are freed in `deinit`, exactly once.
private final class LibYAMLParser {
    private let parser: UnsafeMutablePointer<yaml_parser_t>
    private let input: UnsafeMutableBufferPointer<UInt8>

    init?(_ text: String) {
        let bytes = Array(text.utf8)
        parser = .allocate(capacity: 1)
        guard yaml_parser_initialize(parser) != 0 else {
            parser.deallocate()
            return nil
        }
        input = .allocate(capacity: max(bytes.count, 1))
        _ = input.initialize(from: bytes)
        yaml_parser_set_input_string(parser, input.baseAddress, bytes.count)
        yaml_parser_set_encoding(parser, YAML_UTF8_ENCODING)
    }

    deinit {
        yaml_parser_delete(parser)
        parser.deallocate()
        input.deallocate()
    }

    /// The next document of the stream (an empty one, without root, at the end of the stream).
    func load() -> Result<LibYAMLDocument, YAMLSyntaxError> {
        let document = UnsafeMutablePointer<yaml_document_t>.allocate(capacity: 1)
        guard yaml_parser_load(parser, document) != 0 else {
            // On failure libyaml has already deleted the partial document: only our allocation remains.
            document.deallocate()
            return .failure(syntaxError())
        }
        return .success(LibYAMLDocument(document))
    }

    private func syntaxError() -> YAMLSyntaxError {
        var message = parser.pointee.problem.map { String(cString: $0) } ?? "invalid YAML"
        if let context = parser.pointee.context {
            message += " " + String(cString: context)
        }
        let mark = parser.pointee.problem_mark
        return YAMLSyntaxError(message: "invalid YAML: " + message,
                               mark: YAMLMark(line: Int(mark.line) + 1, column: Int(mark.column) + 1))
    }
}

/// Owns one loaded `yaml_document_t`; `yaml_document_delete` runs in `deinit`, exactly once.
private final class LibYAMLDocument {
    private let document: UnsafeMutablePointer<yaml_document_t>

    init(_ document: UnsafeMutablePointer<yaml_document_t>) { self.document = document }

    deinit {
        yaml_document_delete(document)
        document.deallocate()
    }

    /// libyaml node indices are 1-based; 0 means "no node".
    var rootIndex: Int32? { yaml_document_get_root_node(document) == nil ? nil : 1 }

    func mark(of index: Int32) -> YAMLMark {
        guard let node = yaml_document_get_node(document, index) else { return YAMLMark(line: 1, column: 1) }
        return YAMLMark(line: Int(node.pointee.start_mark.line) + 1, column: Int(node.pointee.start_mark.column) + 1)
    }

    func convert(_ index: Int32, depth: Int, budget: inout Int) -> Result<YAMLNode, YAMLSyntaxError> {
        let mark = mark(of: index)
        budget -= 1
        guard let node = yaml_document_get_node(document, index), depth < YAMLDocument.Limits.maxDepth, budget >= 0 else {
            return .failure(YAMLSyntaxError(message: "document too large or too deeply nested (check aliases)", mark: mark))
        }
        switch node.pointee.type {
        case YAML_SCALAR_NODE:
            let scalar = node.pointee.data.scalar
            let buffer = UnsafeBufferPointer(start: scalar.value, count: Int(scalar.length))
            let text = String(decoding: buffer, as: UTF8.self)
            return .success(YAMLNode(content: .scalar(text, plain: scalar.style == YAML_PLAIN_SCALAR_STYLE), mark: mark))
        case YAML_SEQUENCE_NODE:
            var items: [YAMLNode] = []
            var item = node.pointee.data.sequence.items.start
            while let current = item, current != node.pointee.data.sequence.items.top {
                switch convert(current.pointee, depth: depth + 1, budget: &budget) {
                case .failure(let error): return .failure(error)
                case .success(let child): items.append(child)
                }
                item = current + 1
            }
            return .success(YAMLNode(content: .sequence(items), mark: mark))
        case YAML_MAPPING_NODE:
            var pairs: [YAMLNode.Pair] = []
            var pair = node.pointee.data.mapping.pairs.start
            while let current = pair, current != node.pointee.data.mapping.pairs.top {
                let key = convert(current.pointee.key, depth: depth + 1, budget: &budget)
                let value = convert(current.pointee.value, depth: depth + 1, budget: &budget)
                switch (key, value) {
                case (.failure(let error), _), (_, .failure(let error)): return .failure(error)
                case (.success(let k), .success(let v)): pairs.append(.init(key: k, value: v))
                }
                pair = current + 1
            }
            return .success(YAMLNode(content: .mapping(pairs), mark: mark))
        default:
            return .failure(YAMLSyntaxError(message: "unsupported YAML node", mark: mark))
        }
    }
}
