/// Routes are tried in file order and the first match wins, so a general route above a specific one silently takes
/// every request meant for it — the specific route's verifiers never run. That is an error, not a warning: the file
/// says one thing and the gateway would do another.
extension ConfigLoader {
    /// Reports each route that an earlier route shadows (the first such earlier route), at the later route.
    static func checkShadowing(_ routes: [DecodedRoute], context: ConfigContext) {
        for (index, later) in routes.enumerated() {
            guard let earlier = routes[..<index].first(where: { covers($0.config.match, later.config.match) }) else { continue }
            context.report("route \"\(later.config.name)\" can never match: route \"\(earlier.config.name)\" "
                           + "(line \(earlier.node.mark.line)) catches every request it would (order routes from specific to general)",
                           at: later.node, path: later.path)
        }
    }

    /// Whether every request `later` matches is matched by `earlier`: its path covers the later path, its methods
    /// are any or a superset, and its host is any or the same (a host without a port covers that host on any port).
    static func covers(_ earlier: RouteMatchConfig, _ later: RouteMatchConfig) -> Bool {
        pathCovers(earlier.path, later.path) && methodsCover(earlier.methods, later.methods) && hostCovers(earlier.host, later.host)
    }

    static func pathCovers(_ earlier: PathMatch, _ later: PathMatch) -> Bool {
        switch (earlier, later) {
        case (.exact(let e), .exact(let l)): e == l
        // An exact path matches one path; a prefix always more than one.
        case (.exact, .prefix): false
        case (.prefix(let e), .exact(let l)), (.prefix(let e), .prefix(let l)): l.utf8.starts(with: e.utf8)
        }
    }

    /// nil = any method.
    static func methodsCover(_ earlier: [String]?, _ later: [String]?) -> Bool {
        guard let earlier else { return true }
        guard let later else { return false }
        return Set(later).isSubset(of: Set(earlier))
    }

    /// nil = any host. Hosts are already normalised (lower case, no trailing dot).
    static func hostCovers(_ earlier: String?, _ later: String?) -> Bool {
        guard let earlier else { return true }
        guard let later else { return false }
        if earlier == later { return true }
        // "api" (any port) covers "api:8443"; "api:8443" does not cover "api" (any port).
        guard !hostHasPort(earlier), hostHasPort(later) else { return false }
        return hostWithoutPort(later) == earlier
    }

    /// As the route table reads it: "[::1]:8080" and "api:8080" carry a port; "::1", "[::1]" and "api" do not.
    static func hostHasPort(_ host: String) -> Bool {
        if host.hasPrefix("[") { return host.contains("]:") }
        return host.filter { $0 == ":" }.count == 1
    }

    static func hostWithoutPort(_ host: String) -> String {
        guard hostHasPort(host), let colon = host.lastIndex(of: ":") else { return host }
        return String(host[..<colon])
    }
}
