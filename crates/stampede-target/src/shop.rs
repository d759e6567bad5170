//! A small shop under `/shop/`, so that demos and tests of user flows need no third-party app:
//!
//! - `POST /shop/login` `{"user": …, "password": …}` → `{"token": …}` (any user; the password
//!   must not be empty);
//! - `GET /shop/products` → the catalogue (ten products), `GET /shop/products/{id}` → one;
//! - `POST /shop/cart` `{"productId": 3}` (one item) with `Authorization: Bearer TOKEN` →
//!   201 `{"items": n}` (400 when `productId` is not a number — a JSON string is refused, as a
//!   typed API does; 404 for an unknown product);
//! - `POST /shop/checkout` `{"orderId": …, "coupon": …}` (the coupon optional, but one that
//!   `admin/setup` gave) with the token → 201 `{"orderId", "items"}`, and
//!   the cart is emptied; 409 for an order id seen before, 400 for an empty cart;
//!   `GET /shop/orders/{orderId}` → that order (404 for an unknown one);
//! - `POST /shop/admin/setup` → `{"couponCode": …}` and `POST /shop/admin/teardown` (each
//!   counted: a test's setup and teardown should each reach it once);
//! - `GET /shop/stats` → the counters: logins, setups, teardowns, orders (distinct order ids),
//!   duplicate order ids, requests without a valid token, checkouts by number of items,
//!   checkouts refused for an empty cart.
//!
//! A missing or unknown token gets 401. State lives in memory, for the server's life.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

use http::{Method, StatusCode, header};
use serde_json::{Value, json};

/// The catalogue: (id, name, price in cents).
const PRODUCTS: [(u64, &str, u64); 10] = [
    (1, "kettle", 2_999),
    (2, "teapot", 1_999),
    (3, "mug", 799),
    (4, "grinder", 4_500),
    (5, "scale", 2_250),
    (6, "filter papers", 499),
    (7, "dripper", 1_800),
    (8, "beans 250 g", 1_150),
    (9, "beans 1 kg", 3_900),
    (10, "tray", 1_299),
];

/// The shop's state and counters.
#[derive(Debug, Default)]
pub struct Shop {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Token → user.
    tokens: HashMap<String, String>,
    /// Users that logged in.
    users: HashSet<String>,
    /// Token → items in the cart.
    carts: HashMap<String, u64>,
    /// Coupon codes `admin/setup` gave.
    coupons: Vec<String>,
    /// Order id → its number of items.
    orders: HashMap<String, u64>,
    counts: ShopCounts,
}

/// What the shop counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShopCounts {
    /// Logins accepted (`POST /shop/login`), each giving a new token.
    pub logins: u64,
    /// Distinct user names that logged in.
    pub users: u64,
    /// `POST /shop/admin/setup` calls, each giving a new coupon code.
    pub setups: u64,
    /// `POST /shop/admin/teardown` calls.
    pub teardowns: u64,
    /// Accepted checkouts (each with a new order id).
    pub orders: u64,
    /// Checkouts refused because their order id was used before.
    pub duplicate_order_ids: u64,
    /// Requests to the cart or checkout without a valid token.
    pub unauthorized: u64,
    /// Items added to carts.
    pub cart_adds: u64,
    /// Accepted checkouts by the number of items in the cart.
    pub checkouts_by_items: BTreeMap<u64, u64>,
    /// Checkouts refused because the cart was empty.
    pub empty_checkouts: u64,
}

impl ShopCounts {
    fn json(&self) -> Value {
        let by_items: serde_json::Map<String, Value> =
            self.checkouts_by_items.iter().map(|(k, n)| (k.to_string(), json!(n))).collect();
        json!({
            "logins": self.logins,
            "users": self.users,
            "setups": self.setups,
            "teardowns": self.teardowns,
            "orders": self.orders,
            "duplicateOrderIds": self.duplicate_order_ids,
            "unauthorized": self.unauthorized,
            "cartAdds": self.cart_adds,
            "checkoutsByItems": by_items,
            "emptyCheckouts": self.empty_checkouts,
        })
    }
}

/// An answer: status and JSON body.
pub(crate) type Answer = (StatusCode, Value);

impl Shop {
    /// What the shop counted so far.
    pub fn counts(&self) -> ShopCounts {
        self.lock().counts.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answers a request under `/shop/` (`path` without that prefix).
    pub(crate) fn handle(&self, method: &Method, path: &str, headers: &http::HeaderMap, body: &[u8]) -> Answer {
        let body = || serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
        match (method, path) {
            (&Method::POST, "login") => self.login(&body()),
            (&Method::GET, "products") => (StatusCode::OK, Value::Array(PRODUCTS.iter().map(product).collect())),
            (&Method::GET, p) if p.starts_with("products/") => {
                match p["products/".len()..].parse::<u64>().ok().and_then(|id| PRODUCTS.iter().find(|x| x.0 == id)) {
                    Some(p) => (StatusCode::OK, product(p)),
                    None => error(StatusCode::NOT_FOUND, "no such product"),
                }
            }
            (&Method::GET, p) if p.starts_with("orders/") => {
                let id = &p["orders/".len()..];
                match self.lock().orders.get(id) {
                    Some(items) => (StatusCode::OK, json!({"orderId": id, "items": items})),
                    None => error(StatusCode::NOT_FOUND, "no such order"),
                }
            }
            (&Method::POST, "cart") => self.add_to_cart(bearer(headers), &body()),
            (&Method::POST, "checkout") => self.checkout(bearer(headers), &body()),
            (&Method::POST, "admin/setup") => {
                let mut s = self.lock();
                s.counts.setups += 1;
                let code = format!("SETUP-{}", s.counts.setups);
                s.coupons.push(code.clone());
                (StatusCode::OK, json!({"couponCode": code}))
            }
            (&Method::POST, "admin/teardown") => {
                self.lock().counts.teardowns += 1;
                (StatusCode::OK, json!({"ok": true}))
            }
            (_, "stats") => (StatusCode::OK, self.lock().counts.json()),
            _ => error(StatusCode::NOT_FOUND, "not found"),
        }
    }

    fn login(&self, body: &Value) -> Answer {
        let user = body.get("user").and_then(Value::as_str).unwrap_or_default();
        let password = body.get("password").and_then(Value::as_str).unwrap_or_default();
        if user.is_empty() || password.is_empty() {
            return error(StatusCode::BAD_REQUEST, "`user` and `password` are needed");
        }
        let mut s = self.lock();
        s.counts.logins += 1;
        let token = format!("t{}-{}", s.counts.logins, user.len());
        if s.users.insert(user.to_string()) {
            s.counts.users += 1;
        }
        s.tokens.insert(token.clone(), user.to_string());
        (StatusCode::OK, json!({"token": token}))
    }

    /// The session of `token`, counting a request without a valid one.
    fn session(s: &mut State, token: Option<&str>) -> Result<String, Answer> {
        match token.filter(|t| s.tokens.contains_key(*t)) {
            Some(t) => Ok(t.to_string()),
            None => {
                s.counts.unauthorized += 1;
                Err(error(StatusCode::UNAUTHORIZED, "log in first: `Authorization: Bearer TOKEN`"))
            }
        }
    }

    fn add_to_cart(&self, token: Option<&str>, body: &Value) -> Answer {
        let mut s = self.lock();
        let token = match Self::session(&mut s, token) {
            Ok(t) => t,
            Err(answer) => return answer,
        };
        let Some(id) = body.get("productId").and_then(Value::as_u64) else {
            return error(StatusCode::BAD_REQUEST, "`productId` must be a number");
        };
        if !PRODUCTS.iter().any(|p| p.0 == id) {
            return error(StatusCode::NOT_FOUND, "no such product");
        }
        s.counts.cart_adds += 1;
        let items = s.carts.entry(token).or_default();
        *items += 1;
        let items = *items;
        (StatusCode::CREATED, json!({"items": items}))
    }

    fn checkout(&self, token: Option<&str>, body: &Value) -> Answer {
        let mut s = self.lock();
        let token = match Self::session(&mut s, token) {
            Ok(t) => t,
            Err(answer) => return answer,
        };
        let Some(order) = body.get("orderId").and_then(Value::as_str).filter(|o| !o.is_empty()) else {
            return error(StatusCode::BAD_REQUEST, "`orderId` must be a string");
        };
        if let Some(coupon) = body.get("coupon")
            && !coupon.as_str().is_some_and(|c| s.coupons.iter().any(|x| x == c))
        {
            return error(StatusCode::BAD_REQUEST, "unknown coupon");
        }
        if s.orders.contains_key(order) {
            s.counts.duplicate_order_ids += 1;
            return error(StatusCode::CONFLICT, "duplicate order id");
        }
        let items = s.carts.remove(&token).unwrap_or(0);
        if items == 0 {
            s.counts.empty_checkouts += 1;
            return error(StatusCode::BAD_REQUEST, "the cart is empty");
        }
        s.orders.insert(order.to_string(), items);
        s.counts.orders += 1;
        *s.counts.checkouts_by_items.entry(items).or_default() += 1;
        (StatusCode::CREATED, json!({"orderId": order, "items": items}))
    }
}

fn product(p: &(u64, &str, u64)) -> Value {
    json!({"id": p.0, "name": p.1, "priceCents": p.2})
}

fn error(status: StatusCode, message: &str) -> Answer {
    (status, json!({"error": message}))
}

fn bearer(headers: &http::HeaderMap) -> Option<&str> {
    headers.get(header::AUTHORIZATION)?.to_str().ok()?.strip_prefix("Bearer ").map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn post(shop: &Shop, path: &str, token: Option<&str>, body: Value) -> Answer {
        let mut headers = http::HeaderMap::new();
        if let Some(t) = token {
            headers.insert(header::AUTHORIZATION, format!("Bearer {t}").parse().unwrap());
        }
        shop.handle(&Method::POST, path, &headers, body.to_string().as_bytes())
    }

    #[test]
    fn a_shopper_logs_in_fills_a_cart_and_checks_out_once_per_order_id() {
        let shop = Shop::default();
        let (status, login) = post(&shop, "login", None, json!({"user": "ann", "password": "pw"}));
        assert_eq!(status, StatusCode::OK);
        let token = login["token"].as_str().unwrap().to_string();
        let t = Some(token.as_str());
        assert_eq!(post(&shop, "cart", None, json!({"productId": 3})).0, StatusCode::UNAUTHORIZED);
        assert_eq!(post(&shop, "cart", t, json!({"productId": "3"})).0, StatusCode::BAD_REQUEST, "typed");
        assert_eq!(post(&shop, "cart", t, json!({"productId": 99})).0, StatusCode::NOT_FOUND);
        assert_eq!(post(&shop, "checkout", t, json!({"orderId": "o-0"})).0, StatusCode::BAD_REQUEST, "empty cart");
        assert_eq!(post(&shop, "cart", t, json!({"productId": 3})), (StatusCode::CREATED, json!({"items": 1})));
        assert_eq!(post(&shop, "cart", t, json!({"productId": 4})), (StatusCode::CREATED, json!({"items": 2})));
        let (status, order) = post(&shop, "checkout", t, json!({"orderId": "o-1"}));
        assert_eq!((status, order), (StatusCode::CREATED, json!({"orderId": "o-1", "items": 2})));
        post(&shop, "cart", t, json!({"productId": 1}));
        assert_eq!(post(&shop, "checkout", t, json!({"orderId": "o-1"})).0, StatusCode::CONFLICT);
        let (status, order) = shop.handle(&Method::GET, "orders/o-1", &http::HeaderMap::new(), b"");
        assert_eq!((status, order["items"].as_u64()), (StatusCode::OK, Some(2)));
        let c = shop.counts();
        assert_eq!(
            (c.logins, c.users, c.orders, c.duplicate_order_ids, c.unauthorized, c.empty_checkouts, c.cart_adds),
            (1, 1, 1, 1, 1, 1, 3)
        );
        assert_eq!(c.checkouts_by_items, BTreeMap::from([(2, 1)]));
        let (_, products) = shop.handle(&Method::GET, "products", &http::HeaderMap::new(), b"");
        assert_eq!(products.as_array().map(Vec::len), Some(10));
        let (status, one) = shop.handle(&Method::GET, "products/3", &http::HeaderMap::new(), b"");
        assert_eq!((status, one["name"].as_str()), (StatusCode::OK, Some("mug")));
    }
}
