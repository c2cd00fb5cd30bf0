"""Retail task recipes: product search and details, order lookups, search-then-order."""

from __future__ import annotations

from slca.data.spec import ChainRecipe, Ctx, Draw, Reject, ToolRecipe, num

D = "retail"


def _keyword(ctx: Ctx) -> tuple[str, str]:
    product = ctx.world.products[ctx.pick("product")]
    return product["product_id"], product["name"].split()[-1].lower()


def _search(ctx: Ctx) -> Draw:
    _, word = _keyword(ctx)
    return Draw({"q": word}, {"query": word}, word)


def _search_facts(response: dict, draw: Draw) -> dict:
    if not response["products"]:
        raise Reject("no products")
    top = response["products"][0]
    return {"count": str(response["count"]), "name": top["name"], "price": num(top["price"])}


SEARCH = ToolRecipe(
    tool="search_products",
    domain=D,
    sample=_search,
    facts=_search_facts,
    gist="search the product catalog",
    asks=(
        "Do you sell any {q}?",
        "Search the store for {q}.",
        "I'm looking for a {q}. What do you have?",
        "Can you find {q} in the catalog?",
        "Show me products matching '{q}'.",
        "Any {q} in stock, and how much?",
    ),
    parallel=(
        "Search the catalog for {items}.",
        "Do you have {items}?",
        "Look up {items} in the store.",
        "I'm shopping for {items}. What's available?",
        "Find products for {items}.",
        "Show me {items}.",
    ),
    answers=(
        "I found {count} match(es) for '{q}'; the first is {name} at ${price}.",
        "There are {count} product(s) for {q}, e.g. {name} for ${price}.",
        "'{q}' gives {count} result(s); top one: {name}, ${price}.",
    ),
)


def _product(ctx: Ctx) -> Draw:
    pid, _ = _keyword(ctx)
    return Draw({"pid": pid}, {"product_id": pid}, pid)


PRODUCT = ToolRecipe(
    tool="get_product",
    domain=D,
    sample=_product,
    gist="look up a product",
    facts=lambda r, d: {"name": r["name"], "price": num(r["price"]), "stock": str(r["stock"])},
    asks=(
        "How much is product {pid}, and is it in stock?",
        "Tell me about item {pid}.",
        "What's the price of {pid}?",
        "Is {pid} available right now?",
        "Please get the details for product {pid}.",
        "Stock and price for {pid}?",
    ),
    parallel=(
        "Compare products {items}.",
        "Get details for {items}.",
        "What do {items} cost?",
        "Are {items} in stock?",
        "Look up {items}, please.",
        "Prices and stock for {items}?",
    ),
    answers=(
        "{pid} is the {name}, priced at ${price} with {stock} in stock.",
        "{name} ({pid}): ${price}, {stock} units in stock.",
        "Product {pid} is {name}; it costs ${price} and {stock} are available.",
    ),
)


def _shopper(ctx: Ctx) -> dict:
    return ctx.world.shoppers[ctx.pick("shopper")]


def _orders(ctx: Ctx) -> Draw:
    email = _shopper(ctx)["email"]
    return Draw({"email": email}, {"email": email}, email)


def _orders_facts(response: dict, draw: Draw) -> dict:
    latest = response["orders"][0]
    return {"count": str(response["count"]), "latest": latest["order_id"], "status": latest["status"]}


ORDERS = ToolRecipe(
    tool="list_orders",
    domain=D,
    sample=_orders,
    facts=_orders_facts,
    gist="look up your orders",
    asks=(
        "What orders do I have? My email is {email}.",
        "List the orders for {email}.",
        "Can you show me my order history? I'm {email}.",
        "How many orders are on the account {email}?",
        "Please check my orders, account email {email}.",
        "My orders ({email}), please.",
    ),
    parallel=(
        "List the orders of {items}.",
        "Check the orders for {items}.",
        "What orders do {items} have?",
        "Order history for {items}, please.",
        "Look up orders of {items}.",
        "How many orders do {items} have?",
    ),
    answers=(
        "{email} has {count} order(s); the latest is {latest}, which is {status}.",
        "I see {count} order(s) for {email}. Most recent: {latest} ({status}).",
        "Account {email}: {count} order(s), newest {latest} with status {status}.",
    ),
)


def _latest(ctx: Ctx) -> dict:
    return {"email": _shopper(ctx)["email"]}


def _latest_steps(slots: dict, done: list[list[dict]]) -> list[dict] | None:
    if not done:
        return [{"name": "list_orders", "arguments": {"email": slots["email"]}}]
    if len(done) == 1:
        return [{"name": "get_order", "arguments": {"order_id": done[0][0]["orders"][0]["order_id"]}}]
    return None


def _latest_facts(slots: dict, done: list[list[dict]]) -> dict:
    order = done[1][0]
    facts = {"order": order["order_id"], "status": order["status"], "total": num(order["total"])}
    facts.update({f"item{i}": it["name"] for i, it in enumerate(order["items"])})
    facts["_items"] = ", ".join(it["name"] for it in order["items"])
    return facts


LATEST = ChainRecipe(
    name="orders_then_details",
    domain=D,
    tools=("list_orders", "get_order"),
    sample=_latest,
    steps=_latest_steps,
    facts=_latest_facts,
    asks=(
        "What's in my most recent order? My email is {email}.",
        "Show me the items of my latest order ({email}).",
        "Can you check the status and contents of the newest order for {email}?",
        "I'm {email}. What did I buy in my last order and where is it?",
        "Look up the latest order on {email} and tell me what's in it.",
        "My last order, please: items and status. Account {email}.",
    ),
    answers=(
        "Your latest order {order} is {status}, total ${total}: {_items}.",
        "Order {order} ({status}) contains {_items}, ${total} in total.",
        "The most recent order is {order}: {_items}; status {status}, total ${total}.",
    ),
)


def _buy(ctx: Ctx) -> dict:
    _, word = _keyword(ctx)
    shopper = _shopper(ctx)
    return {
        "q": word,
        "email": shopper["email"],
        "qty": str(ctx.rng.choice((1, 1, 2))),
        "street": f"{ctx.rng.randint(1, 250)} Main Street",
        "city": shopper["city"],
        "zip": f"{ctx.rng.randint(10000, 99999)}",
    }


def _buy_steps(slots: dict, done: list[list[dict]]) -> list[dict] | None:
    if not done:
        return [
            {
                "name": "search_products",
                "arguments": {"query": slots["q"], "in_stock_only": True, "sort_by": "price_asc"},
            }
        ]
    if len(done) == 1:
        if not done[0][0]["products"]:
            raise Reject("nothing in stock")
        return [
            {
                "name": "place_order",
                "arguments": {
                    "email": slots["email"],
                    "items": [{"product_id": done[0][0]["products"][0]["product_id"], "quantity": int(slots["qty"])}],
                    "shipping": {
                        "method": "standard",
                        "address": {"street": slots["street"], "city": slots["city"], "postal_code": slots["zip"]},
                    },
                },
            }
        ]
    return None


BUY = ChainRecipe(
    name="search_then_order",
    domain=D,
    tools=("search_products", "place_order"),
    writes=True,
    sample=_buy,
    steps=_buy_steps,
    facts=lambda s, d: {
        "order": d[1][0]["order_id"],
        "item": d[1][0]["items"][0]["name"],
        "total": num(d[1][0]["total"]),
    },
    asks=(
        "Order {qty} of the cheapest in-stock {q} for {email}, standard shipping to {street}, {city} {zip}.",
        "Find the cheapest {q} that's in stock and buy {qty} for {email}; ship standard to {street}, {city}, {zip}.",
        (
            "I want {qty} of your least expensive {q} (in stock). "
            "Account {email}, deliver to {street}, {city} {zip}, standard."
        ),
        (
            "Please search for {q}, pick the cheapest available one and order {qty} to {street}, {city} {zip} "
            "for {email} with standard delivery."
        ),
        "Buy {qty} cheapest in-stock {q} on {email}'s account, standard shipping, address {street}, {city}, {zip}.",
        (
            "Can you get me {qty} of the lowest-priced {q} you have in stock? "
            "{email}; ship standard to {street}, {city} {zip}."
        ),
    ),
    answers=(
        "Order {order} is placed: {qty} × {item}, total ${total}.",
        "I ordered {qty} {item} for {email} as {order}; the total is ${total}.",
        "Done. Your order {order} for {item} comes to ${total}.",
    ),
)

RECIPES = (SEARCH, PRODUCT, ORDERS)
CHAINS = (LATEST, BUY)
