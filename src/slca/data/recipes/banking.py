"""Banking task recipes: balances, transactions, customer lookup, and lookup-then-act chains."""

from __future__ import annotations

from slca.data.spec import (
    ChainRecipe,
    Ctx,
    Draw,
    Reject,
    ToolRecipe,
    join_items,
    money,
    num,
)

D = "banking"


def _accounts(ctx: Ctx, customer_id: str) -> list[dict]:
    return [a for a in ctx.world.accounts.values() if a["customer_id"] == customer_id]


def _balance(ctx: Ctx) -> Draw:
    account = ctx.rng.choice(_accounts(ctx, ctx.pick("bank_customer")))
    aid = account["account_id"]
    return Draw({"account": aid}, {"account_id": aid}, aid)


BALANCE = ToolRecipe(
    tool="get_balance",
    domain=D,
    sample=_balance,
    gist="check an account balance",
    facts=lambda r, d: {"balance": num(r["balance"]), "currency": r["currency"], "available": num(r["available"])},
    asks=(
        "What's the balance on account {account}?",
        "How much money is in {account}?",
        "Can you check the current balance of my account {account}?",
        "Please tell me what's available in account {account}.",
        "Balance for {account}, please.",
        "I'd like to know how much I have in {account} right now.",
    ),
    parallel=(
        "What are the balances of {items}?",
        "Check the balance on each of {items}.",
        "How much is in {items}?",
        "Give me current balances for {items}.",
        "Please look up {items} and tell me their balances.",
        "Balances for {items}, please.",
    ),
    answers=(
        "Account {account} has a balance of {balance} {currency}, with {available} {currency} available.",
        "The balance of {account} is {balance} {currency} ({available} {currency} available).",
        "{account}: {balance} {currency} balance, {available} {currency} available to spend.",
    ),
)


def _transactions(ctx: Ctx) -> Draw:
    account = ctx.rng.choice(_accounts(ctx, ctx.pick("bank_customer")))
    limit = 3 if ctx.plain else ctx.rng.choice((2, 3, 5))
    aid = account["account_id"]
    return Draw({"account": aid, "n": str(limit)}, {"account_id": aid, "limit": limit}, aid)


def _transactions_facts(response: dict, draw: Draw) -> dict:
    if not response["transactions"]:
        raise Reject("no transactions")
    latest = response["transactions"][0]
    return {
        "count": str(response["count"]),
        "total": num(response["total_amount"]),
        "latest": latest["description"],
        "amount": num(latest["amount"]),
    }


TRANSACTIONS = ToolRecipe(
    tool="get_transactions",
    domain=D,
    sample=_transactions,
    facts=_transactions_facts,
    gist="list account transactions",
    asks=(
        "Show me the last {n} transactions on {account}.",
        "What were the {n} most recent charges on {account}?",
        "Can you pull the latest {n} transactions for account {account}?",
        "List {n} recent transactions from {account}, please.",
        "I want to review my account {account}: what are the last {n} transactions?",
        "Recent activity on {account}? Just the last {n}, please.",
    ),
    answers=(
        "The last {count} transactions on {account} total {total}; the most recent is {latest} ({amount}).",
        "Most recent on {account}: {latest} for {amount}. Across those {count} transactions the total is {total}.",
        "{account} shows {count} recent transactions adding up to {total}, the latest being {latest} at {amount}.",
    ),
)


def _find(ctx: Ctx) -> Draw:
    customer = ctx.world.bank_customers[ctx.pick("bank_customer")]
    return Draw({"name": customer["name"]}, {"name": customer["name"]}, customer["name"])


def _find_facts(response: dict, draw: Draw) -> dict:
    if response["count"] != 1:
        raise Reject("ambiguous name")
    return {"customer": response["customers"][0]["customer_id"], "email": response["customers"][0]["email"]}


FIND = ToolRecipe(
    tool="find_customer",
    domain=D,
    sample=_find,
    facts=_find_facts,
    gist="look up a bank customer",
    asks=(
        "What's the customer id of {name}?",
        "Look up the bank customer {name}.",
        "Can you find {name} in our customer records?",
        "Find the customer record for {name}, please.",
        "I need {name}'s customer id and email.",
        "Is {name} one of our customers? Get me their id.",
    ),
    parallel=(
        "Find the customer ids of {items}.",
        "Look up these customers: {items}.",
        "Get me the customer records for {items}.",
        "What are the ids of {items}?",
        "Please search for {items} in the customer list.",
        "I need ids for {items}.",
    ),
    answers=(
        "{name} is customer {customer} (email {email}).",
        "Found {name}: customer id {customer}, email {email}.",
        "The customer id for {name} is {customer}; their email is {email}.",
    ),
)


def _owner(ctx: Ctx) -> dict:
    customer = ctx.world.bank_customers[ctx.pick("bank_customer")]
    return {"name": customer["name"]}


def _owner_steps(slots: dict, done: list[list[dict]]) -> list[dict] | None:
    if not done:
        return [{"name": "find_customer", "arguments": {"name": slots["name"]}}]
    if len(done) == 1:
        if done[0][0]["count"] != 1:
            raise Reject("ambiguous name")
        return [{"name": "list_accounts", "arguments": {"customer_id": done[0][0]["customers"][0]["customer_id"]}}]
    return None


def _owner_facts(slots: dict, done: list[list[dict]]) -> dict:
    accounts = done[1][0]["accounts"]
    facts = {"customer": done[0][0]["customers"][0]["customer_id"], "count": str(len(accounts))}
    facts.update({f"acc{i}": a["account_id"] for i, a in enumerate(accounts)})
    facts["_list"] = join_items([f"{a['account_id']} ({a['type']})" for a in accounts])
    return facts


ACCOUNTS_OF = ChainRecipe(
    name="customer_then_accounts",
    domain=D,
    tools=("find_customer", "list_accounts"),
    sample=_owner,
    steps=_owner_steps,
    facts=_owner_facts,
    asks=(
        "Which accounts does {name} hold?",
        "List all bank accounts belonging to {name}.",
        "Can you find {name} and show me their accounts?",
        "What accounts are open under {name}'s name?",
        "I need the account numbers of our customer {name}.",
        "Please pull up {name}'s accounts.",
    ),
    answers=(
        "{name} (customer {customer}) has {count} account(s): {_list}.",
        "Customer {customer}, {name}, holds {count} account(s): {_list}.",
        "I found {name} as {customer}; their {count} account(s) are {_list}.",
    ),
)


def _move(ctx: Ctx) -> dict:
    cid = ctx.pick("bank_customer")
    owned = _accounts(ctx, cid)
    pairs = [
        (a, b) for a in owned for b in owned if a is not b and a["type"] != "credit" and a["currency"] == b["currency"]
    ]
    if not pairs:
        raise Reject("needs two accounts in one currency")
    src, dst = ctx.rng.choice(pairs)
    amount = float(ctx.rng.choice((25, 50, 75, 100, 150, 200, 250)))
    return {
        "amount": money(amount),
        "cur": src["currency"],
        "src": src["account_id"],
        "dst": dst["account_id"],
        "_amount": amount,
        "_cid": cid,
    }


def _move_steps(slots: dict, done: list[list[dict]]) -> list[dict] | None:
    if not done:
        return [{"name": "list_accounts", "arguments": {"customer_id": slots["_cid"]}}]
    if len(done) == 1:
        return [
            {
                "name": "transfer_funds",
                "arguments": {
                    "from_account_id": slots["src"],
                    "to_account_id": slots["dst"],
                    "amount": slots["_amount"],
                },
            }
        ]
    return None


MOVE = ChainRecipe(
    name="accounts_then_transfer",
    domain=D,
    tools=("list_accounts", "transfer_funds"),
    writes=True,
    sample=_move,
    steps=_move_steps,
    facts=lambda s, d: {"transfer": d[1][0]["transfer_id"], "after": num(d[1][0]["from_balance_after"])},
    asks=(
        "I'm customer {_cid}. Check my accounts, then move {amount} {cur} from {src} to {dst}.",
        "For customer {_cid}: confirm the accounts and transfer {amount} {cur} from {src} into {dst}.",
        "Please list {_cid}'s accounts and then send {amount} {cur} from {src} to {dst}.",
        "Customer {_cid} wants {amount} {cur} moved from {src} to {dst}; look up the accounts first.",
        "Transfer {amount} {cur} from {src} to {dst} for customer {_cid}, after checking their account list.",
        "Can you verify customer {_cid}'s accounts and move {amount} {cur} from account {src} to account {dst}?",
    ),
    answers=(
        "Transferred {amount} {cur} from {src} to {dst} (transfer {transfer}); {src} now has {after} {cur}.",
        "Done: transfer {transfer} moved {amount} {cur} to {dst}. The balance left in {src} is {after} {cur}.",
        "The transfer went through as {transfer}. {src} balance after: {after} {cur}.",
    ),
)

RECIPES = (BALANCE, TRANSACTIONS, FIND)
CHAINS = (ACCOUNTS_OF, MOVE)
