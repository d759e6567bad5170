//! Every request the operator makes to the API server, counted by verb and resource
//! (`stampede_operator_api_requests_total{verb,resource}`): what a reconcile costs the API
//! server, and proof that results come from the watches' caches rather than from lists.

use std::task::{Context, Poll};

use prometheus::IntCounterVec;

/// A tower layer for the kube client that counts each request it passes on.
#[derive(Clone, Debug)]
pub struct CountLayer(pub IntCounterVec);

impl<S> tower::Layer<S> for CountLayer {
    type Service = Counted<S>;

    fn layer(&self, inner: S) -> Counted<S> {
        Counted { inner, counter: self.0.clone() }
    }
}

/// The service [`CountLayer`] makes.
#[derive(Clone, Debug)]
pub struct Counted<S> {
    inner: S,
    counter: IntCounterVec,
}

impl<S, B> tower::Service<http::Request<B>> for Counted<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let (verb, resource) = classify(request.method(), request.uri().path(), request.uri().query());
        self.counter.with_label_values(&[verb, &resource]).inc();
        self.inner.call(request)
    }
}

/// The Kubernetes verb and the resource (with its subresource, `loadtests/status`) of a
/// request to the API server: `/api/v1/namespaces/NS/configmaps?watch=true` is a `watch` of
/// `configmaps`, `/apis/G/V/namespaces/NS/loadtests/NAME/status` a `patch` (or …) of
/// `loadtests/status`. A path of no known shape is `other`.
pub fn classify(method: &http::Method, path: &str, query: Option<&str>) -> (&'static str, String) {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segments.as_slice() {
        ["api", _version, rest @ ..] => rest,
        ["apis", _group, _version, rest @ ..] => rest,
        _ => return (verb_of(method, false, query), "other".into()),
    };
    // `namespaces/NS/…` names a namespaced resource; `namespaces` or `namespaces/NS` alone are
    // the namespaces themselves.
    let rest = match rest {
        ["namespaces", _ns, tail @ ..] if !tail.is_empty() => tail,
        other => other,
    };
    let (resource, collection) = match rest {
        [] => ("other".to_string(), true),
        [plural] => ((*plural).to_string(), true),
        [plural, _name] => ((*plural).to_string(), false),
        [plural, _name, sub, ..] => (format!("{plural}/{sub}"), false),
    };
    (verb_of(method, collection, query), resource)
}

fn verb_of(method: &http::Method, collection: bool, query: Option<&str>) -> &'static str {
    let watch = query.is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    match *method {
        http::Method::GET if watch => "watch",
        http::Method::GET if collection => "list",
        http::Method::GET => "get",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if collection => "deletecollection",
        http::Method::DELETE => "delete",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    #[test]
    fn requests_are_named_by_their_kubernetes_verb_and_resource() {
        let cases = [
            (Method::GET, "/api/v1/namespaces/a/configmaps", Some("labelSelector=x"), "list", "configmaps"),
            (
                Method::GET,
                "/api/v1/namespaces/a/configmaps",
                Some("watch=true&resourceVersion=5"),
                "watch",
                "configmaps",
            ),
            (Method::GET, "/api/v1/namespaces/a/configmaps/b", None, "get", "configmaps"),
            (Method::POST, "/apis/batch/v1/namespaces/a/jobs", None, "create", "jobs"),
            (
                Method::PATCH,
                "/apis/stampede.dev/v1alpha1/namespaces/a/loadtests/b/status",
                None,
                "patch",
                "loadtests/status",
            ),
            (Method::PUT, "/apis/coordination.k8s.io/v1/namespaces/a/leases/l", None, "update", "leases"),
            (Method::DELETE, "/api/v1/namespaces/a/pods/p", None, "delete", "pods"),
            (Method::DELETE, "/api/v1/namespaces/a/pods", Some("labelSelector=x"), "deletecollection", "pods"),
            (Method::GET, "/apis/stampede.dev/v1alpha1/loadtests", Some("watch=1"), "watch", "loadtests"),
            (Method::GET, "/api/v1/namespaces", None, "list", "namespaces"),
            (Method::GET, "/api/v1/namespaces/a", None, "get", "namespaces"),
            (
                Method::POST,
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                None,
                "create",
                "subjectaccessreviews",
            ),
            (Method::GET, "/version", None, "get", "other"),
        ];
        for (method, path, query, verb, resource) in cases {
            assert_eq!(classify(&method, path, query), (verb, resource.to_string()), "{method} {path}");
        }
    }
}
