"""Retail domain: product search and details, a shopper's orders, ordering, cancelling, returns."""

from __future__ import annotations

from slca.tools.entities import PRODUCT_CATEGORIES
from slca.tools.registry import (
    array,
    boolean,
    conflict,
    date,
    enum,
    integer,
    not_found,
    number,
    obj,
    params,
    string,
    tool,
)
from slca.tools.world import World

D = "retail"
ORDER_STATUSES = ("processing", "shipped", "delivered", "cancelled")
SHIPPING = ("standard", "express", "overnight")
SHIPPING_FEE = {"standard": 0.0, "express": 9.99, "overnight": 24.99}
PRODUCT_ID = string("Product id from search_products, e.g. 'PRD-301'.", pattern="^PRD-[0-9]+$")
ORDER_ID = string("Order id, e.g. 'ORD-7001'.", pattern="^ORD-[0-9]+$")
EMAIL = string("The shopper's account email.", format="email")
PRODUCT = obj(
    {
        "product_id": string(),
        "name": string(),
        "category": enum(PRODUCT_CATEGORIES),
        "price": number(minimum=0),
        "in_stock": boolean(),
        "rating": number(minimum=0, maximum=5),
    }
)
ITEM = obj(
    {
        "item_id": string(),
        "product_id": string(),
        "name": string(),
        "quantity": integer(minimum=1),
        "unit_price": number(minimum=0),
        "returned_quantity": integer(minimum=0),
    }
)
ORDER = obj(
    {
        "order_id": string(),
        "customer_id": string(),
        "status": enum(ORDER_STATUSES),
        "placed_on": date(),
        "items": array(ITEM, min_items=1),
        "shipping_method": enum(SHIPPING),
        "total": number(minimum=0),
    }
)


def order_or_raise(world: World, order_id: str) -> dict:
    if order_id not in world.orders:
        raise not_found("order", order_id, "Use list_orders with the shopper's email to get order ids.")
    return world.orders[order_id]


def shopper_by_email(world: World, email: str) -> dict:
    for s in world.shoppers.values():
        if s["email"] == email.strip().lower():
            return s
    raise not_found("shopper", email, "Check the email address on the account.")


def product_row(p: dict) -> dict:
    return {
        "product_id": p["product_id"],
        "name": p["name"],
        "category": p["category"],
        "price": p["price"],
        "in_stock": p["stock"] > 0,
        "rating": p["rating"],
    }


@tool(
    D,
    "search_products",
    "Search the product catalog by keyword.",
    params(
        {
            "query": string("Words to look for in product names, e.g. 'headphones'.", minLength=2),
            "category": enum(PRODUCT_CATEGORIES, "Only this category."),
            "max_price": number("Highest price in USD.", 0, 100000),
            "in_stock_only": boolean("Only products that can ship now."),
            "sort_by": enum(("relevance", "price_asc", "price_desc", "rating"), "Ordering."),
        },
        ["query"],
    ),
    obj({"products": array(PRODUCT), "count": integer(minimum=0)}),
)
def search_products(world: World, args: dict) -> dict:
    words = args["query"].lower().split()
    rows = [
        product_row(p)
        for p in world.products.values()
        if any(w in p["name"].lower() or w == p["category"] for w in words)
        and args.get("category", p["category"]) == p["category"]
        and p["price"] <= args.get("max_price", float("inf"))
        and (p["stock"] > 0 or not args.get("in_stock_only"))
    ]
    order = args.get("sort_by", "relevance")
    if order != "relevance":
        key = {
            "price_asc": lambda r: r["price"],
            "price_desc": lambda r: -r["price"],
            "rating": lambda r: -r["rating"],
        }[order]
        rows.sort(key=key)
    return {"products": rows, "count": len(rows)}


@tool(
    D,
    "get_product",
    "Get a product's details and units in stock.",
    params({"product_id": PRODUCT_ID}, ["product_id"]),
    obj({**PRODUCT["properties"], "stock": integer(minimum=0)}),
)
def get_product(world: World, args: dict) -> dict:
    p = world.products.get(args["product_id"])
    if p is None:
        raise not_found("product", args["product_id"], "Use search_products to find product ids.")
    return product_row(p) | {"stock": p["stock"]}


@tool(
    D,
    "list_orders",
    "List a shopper's orders, newest first.",
    params({"email": EMAIL, "status": enum(ORDER_STATUSES, "Only orders in this status.")}, ["email"]),
    obj(
        {
            "customer_id": string(),
            "orders": array(
                obj(
                    {
                        "order_id": string(),
                        "status": enum(ORDER_STATUSES),
                        "placed_on": date(),
                        "total": number(minimum=0),
                        "item_count": integer(minimum=1),
                    }
                )
            ),
            "count": integer(minimum=0),
        }
    ),
)
def list_orders(world: World, args: dict) -> dict:
    shopper = shopper_by_email(world, args["email"])
    rows = [
        {
            "order_id": o["order_id"],
            "status": o["status"],
            "placed_on": o["placed_on"],
            "total": o["total"],
            "item_count": sum(i["quantity"] for i in o["items"]),
        }
        for o in world.orders.values()
        if o["customer_id"] == shopper["customer_id"] and args.get("status", o["status"]) == o["status"]
    ]
    rows.sort(key=lambda r: (r["placed_on"], r["order_id"]), reverse=True)
    return {"customer_id": shopper["customer_id"], "orders": rows, "count": len(rows)}


@tool(
    D,
    "get_order",
    "Get an order with its items (item ids are needed for returns).",
    params({"order_id": ORDER_ID}, ["order_id"]),
    ORDER,
)
def get_order(world: World, args: dict) -> dict:
    return order_or_raise(world, args["order_id"])


ADDRESS = obj(
    {
        "street": string("Street and number.", minLength=3),
        "city": string("City.", minLength=2),
        "postal_code": string("Postal code (3-10 letters, digits or dashes).", pattern="^[A-Za-z0-9 -]{3,10}$"),
    },
    None,
    "Delivery address.",
)


@tool(
    D,
    "place_order",
    "Order products for a shopper; fails if any item is out of stock.",
    params(
        {
            "email": EMAIL,
            "items": array(
                obj({"product_id": PRODUCT_ID, "quantity": integer("Units to order.", 1, 10)}, None, "A line item."),
                "Products and quantities.",
                1,
                10,
            ),
            "shipping": obj(
                {"method": enum(SHIPPING, "Delivery speed."), "address": ADDRESS},
                ["method", "address"],
                "Delivery options.",
            ),
            "gift_wrap": boolean("Wrap the parcel as a gift (USD 4.99)."),
        },
        ["email", "items", "shipping"],
    ),
    ORDER,
)
def place_order(world: World, args: dict) -> dict:
    shopper = shopper_by_email(world, args["email"])
    wanted: dict[str, int] = {}
    for line in args["items"]:
        if line["product_id"] not in world.products:
            raise not_found("product", line["product_id"], "Use search_products to find product ids.")
        wanted[line["product_id"]] = wanted.get(line["product_id"], 0) + int(line["quantity"])
    for pid, qty in wanted.items():
        p = world.products[pid]
        if p["stock"] < qty:
            raise conflict(f"Only {p['stock']} units of '{p['name']}' ({pid}) in stock; requested {qty}.")
    oid = world.next_id("ORD")
    items = []
    for k, (pid, qty) in enumerate(wanted.items()):
        p = world.products[pid]
        p["stock"] -= qty
        items.append(
            {
                "item_id": f"{oid}-{k + 1}",
                "product_id": pid,
                "name": p["name"],
                "quantity": qty,
                "unit_price": p["price"],
                "returned_quantity": 0,
            }
        )
    method = args["shipping"]["method"]
    total = (
        sum(i["quantity"] * i["unit_price"] for i in items)
        + SHIPPING_FEE[method]
        + (4.99 if args.get("gift_wrap") else 0.0)
    )
    order = {
        "order_id": oid,
        "customer_id": shopper["customer_id"],
        "status": "processing",
        "placed_on": world.today,
        "items": items,
        "shipping_method": method,
        "total": round(total, 2),
    }
    world.orders[oid] = order
    return order


@tool(
    D,
    "cancel_order",
    "Cancel an order that has not shipped yet and restock its items.",
    params(
        {
            "order_id": ORDER_ID,
            "reason": enum(
                ("ordered_by_mistake", "found_cheaper", "delivery_too_slow", "other"), "Why the order is cancelled."
            ),
        },
        ["order_id", "reason"],
    ),
    obj({"order_id": string(), "status": enum(("cancelled",)), "refund_amount": number(minimum=0)}),
)
def cancel_order(world: World, args: dict) -> dict:
    order = order_or_raise(world, args["order_id"])
    if order["status"] != "processing":
        hint = " Use return_item for delivered items." if order["status"] == "delivered" else ""
        raise conflict(f"Order {order['order_id']} is already {order['status']} and cannot be cancelled.{hint}")
    order["status"] = "cancelled"
    for item in order["items"]:
        world.products[item["product_id"]]["stock"] += item["quantity"]
    return {"order_id": order["order_id"], "status": "cancelled", "refund_amount": order["total"]}


@tool(
    D,
    "return_item",
    "Return units of a delivered order item for a refund.",
    params(
        {
            "order_id": ORDER_ID,
            "item_id": string("Item id from get_order, e.g. 'ORD-7001-1'.", pattern="^ORD-[0-9]+-[0-9]+$"),
            "quantity": integer("Units to return; defaults to all remaining.", 1, 10),
            "reason": enum(("damaged", "wrong_item", "not_as_described", "no_longer_needed"), "Why it is returned."),
        },
        ["order_id", "item_id", "reason"],
    ),
    obj(
        {
            "return_id": string(),
            "order_id": string(),
            "item_id": string(),
            "quantity": integer(minimum=1),
            "refund_amount": number(minimum=0),
            "status": enum(("approved",)),
        }
    ),
)
def return_item(world: World, args: dict) -> dict:
    order = order_or_raise(world, args["order_id"])
    item = next((i for i in order["items"] if i["item_id"] == args["item_id"]), None)
    if item is None:
        raise not_found("item", args["item_id"], f"Use get_order {order['order_id']} to see its item ids.")
    if order["status"] != "delivered":
        raise conflict(f"Order {order['order_id']} is {order['status']}; only delivered items can be returned.")
    left = item["quantity"] - item["returned_quantity"]
    qty = int(args.get("quantity", left))
    if left == 0 or qty > left:
        raise conflict(f"Item {item['item_id']} has {left} returnable units; requested {max(qty, 1)}.")
    item["returned_quantity"] += qty
    return {
        "return_id": world.next_id("RET"),
        "order_id": order["order_id"],
        "item_id": item["item_id"],
        "quantity": qty,
        "refund_amount": round(qty * item["unit_price"], 2),
        "status": "approved",
    }
