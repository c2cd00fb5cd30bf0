"""Banking domain: customer lookup, accounts, balances, transactions, transfers and bill payment."""

from __future__ import annotations

from slca.tools.entities import PAYEES, TXN_CATEGORIES
from slca.tools.registry import (
    array,
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
from slca.tools.world import World, day_offset

D = "banking"
ACCOUNT_TYPES = ("checking", "savings", "credit", "investment")
CURRENCIES = ("USD", "EUR", "GBP")
CUSTOMER_ID = string("Customer id from find_customer, e.g. 'CUS-1001'.", pattern="^CUS-[0-9]+$")
ACCOUNT_ID = string("Account id from list_accounts, e.g. 'ACC-10010'.", pattern="^ACC-[0-9]+$")
AMOUNT = number("Amount in the source account's currency.", maximum=1_000_000, exclusiveMinimum=0)
TXN = obj(
    {
        "transaction_id": string(),
        "date": date(),
        "amount": number(),
        "category": enum(TXN_CATEGORIES),
        "description": string(),
    }
)


def account_or_raise(world: World, account_id: str) -> dict:
    if account_id not in world.accounts:
        raise not_found("account", account_id, "Use list_accounts to get a customer's account ids.")
    return world.accounts[account_id]


def available(acc: dict) -> float:
    return round(acc["balance"] + acc["credit_limit"], 2)


def post(world: World, acc: dict, amount: float, category: str, description: str, day: str) -> str:
    """Apply a signed amount to an account and record it as the newest transaction."""
    acc["balance"] = round(acc["balance"] + amount, 2)
    txn_id = world.next_id("TXN")
    world.transactions[acc["account_id"]].insert(
        0,
        {
            "transaction_id": txn_id,
            "date": day,
            "amount": round(amount, 2),
            "category": category,
            "description": description,
        },
    )
    return txn_id


@tool(
    D,
    "find_customer",
    "Find bank customers by (part of) their name.",
    params({"name": string("Full or partial customer name.", minLength=2)}, ["name"]),
    obj(
        {
            "customers": array(obj({"customer_id": string(), "name": string(), "email": string()})),
            "count": integer(minimum=0),
        }
    ),
)
def find_customer(world: World, args: dict) -> dict:
    q = args["name"].strip().lower()
    hits = [dict(c) for c in world.bank_customers.values() if q in c["name"].lower()]
    return {"customers": hits, "count": len(hits)}


@tool(
    D,
    "list_accounts",
    "List a customer's bank accounts.",
    params({"customer_id": CUSTOMER_ID, "type": enum(ACCOUNT_TYPES, "Only accounts of this type.")}, ["customer_id"]),
    obj(
        {
            "customer_id": string(),
            "accounts": array(
                obj(
                    {
                        "account_id": string(),
                        "type": enum(ACCOUNT_TYPES),
                        "currency": enum(CURRENCIES),
                        "nickname": string(),
                    }
                )
            ),
        }
    ),
)
def list_accounts(world: World, args: dict) -> dict:
    cid = args["customer_id"]
    if cid not in world.bank_customers:
        raise not_found("customer", cid, "Use find_customer to look up a customer id by name.")
    accs = [
        {k: a[k] for k in ("account_id", "type", "currency", "nickname")}
        for a in world.accounts.values()
        if a["customer_id"] == cid and args.get("type", a["type"]) == a["type"]
    ]
    return {"customer_id": cid, "accounts": accs}


@tool(
    D,
    "get_balance",
    "Get the current and available balance of an account.",
    params({"account_id": ACCOUNT_ID}, ["account_id"]),
    obj(
        {
            "account_id": string(),
            "balance": number(),
            "available": number(),
            "currency": enum(CURRENCIES),
            "as_of": date(),
        }
    ),
)
def get_balance(world: World, args: dict) -> dict:
    acc = account_or_raise(world, args["account_id"])
    return {
        "account_id": acc["account_id"],
        "balance": acc["balance"],
        "available": available(acc),
        "currency": acc["currency"],
        "as_of": world.today,
    }


@tool(
    D,
    "get_transactions",
    "List an account's recent transactions, newest first.",
    params(
        {
            "account_id": ACCOUNT_ID,
            "start_date": date("Earliest date, YYYY-MM-DD."),
            "end_date": date("Latest date, YYYY-MM-DD."),
            "category": enum(TXN_CATEGORIES, "Only this spending category."),
            "limit": integer("Maximum number of transactions.", 1, 50),
        },
        ["account_id"],
    ),
    obj({"account_id": string(), "transactions": array(TXN), "count": integer(minimum=0), "total_amount": number()}),
)
def get_transactions(world: World, args: dict) -> dict:
    acc = account_or_raise(world, args["account_id"])
    lo, hi = args.get("start_date", "0000-01-01"), args.get("end_date", "9999-12-31")
    if lo > hi:
        raise conflict(f"start_date {lo} is after end_date {hi}.")
    rows = [
        dict(t)
        for t in world.transactions[acc["account_id"]]
        if lo <= t["date"] <= hi and args.get("category", t["category"]) == t["category"]
    ]
    rows = rows[: args.get("limit", 20)]
    return {
        "account_id": acc["account_id"],
        "transactions": rows,
        "count": len(rows),
        "total_amount": round(sum(t["amount"] for t in rows), 2),
    }


@tool(
    D,
    "transfer_funds",
    "Move money between two accounts (converted if currencies differ).",
    params(
        {
            "from_account_id": ACCOUNT_ID,
            "to_account_id": ACCOUNT_ID,
            "amount": AMOUNT,
            "memo": string("Note shown on both statements.", maxLength=140),
        },
        ["from_account_id", "to_account_id", "amount"],
    ),
    obj(
        {
            "transfer_id": string(),
            "status": enum(("completed",)),
            "from_account_id": string(),
            "to_account_id": string(),
            "amount": number(),
            "currency": enum(CURRENCIES),
            "credited_amount": number(),
            "credited_currency": enum(CURRENCIES),
            "from_balance_after": number(),
        }
    ),
)
def transfer_funds(world: World, args: dict) -> dict:
    src = account_or_raise(world, args["from_account_id"])
    dst = account_or_raise(world, args["to_account_id"])
    amount = round(float(args["amount"]), 2)
    if src is dst:
        raise conflict("Cannot transfer from an account to itself; choose two different accounts.")
    if amount > available(src):
        raise conflict(
            f"Insufficient funds in {src['account_id']}: available "
            f"{available(src):.2f} {src['currency']}, requested {amount:.2f}."
        )
    credited = round(amount / world.rates[src["currency"]] * world.rates[dst["currency"]], 2)
    memo = args.get("memo", "Transfer")
    post(world, src, -amount, "transfer", f"{memo} to {dst['account_id']}", world.today)
    post(world, dst, credited, "transfer", f"{memo} from {src['account_id']}", world.today)
    return {
        "transfer_id": world.next_id("TRF"),
        "status": "completed",
        "from_account_id": src["account_id"],
        "to_account_id": dst["account_id"],
        "amount": amount,
        "currency": src["currency"],
        "credited_amount": credited,
        "credited_currency": dst["currency"],
        "from_balance_after": src["balance"],
    }


PAYEE = obj(
    {
        "name": enum(PAYEES, "Biller."),
        "reference": string("Customer reference at the biller (6-12 digits).", pattern="^[0-9]{6,12}$"),
    },
    ["name", "reference"],
    "Who to pay.",
)


@tool(
    D,
    "pay_bill",
    "Pay a bill from an account now or on a future date.",
    params(
        {
            "account_id": ACCOUNT_ID,
            "payee": PAYEE,
            "amount": AMOUNT,
            "pay_on": date("Payment date, YYYY-MM-DD; defaults to today."),
        },
        ["account_id", "payee", "amount"],
    ),
    obj(
        {
            "payment_id": string(),
            "status": enum(("paid", "scheduled")),
            "payee": enum(PAYEES),
            "amount": number(),
            "pay_on": date(),
            "balance_after": number(),
        }
    ),
)
def pay_bill(world: World, args: dict) -> dict:
    acc = account_or_raise(world, args["account_id"])
    amount, day = round(float(args["amount"]), 2), args.get("pay_on", world.today)
    if day_offset(day) < 0:
        raise conflict(f"pay_on {day} is in the past; use today ({world.today}) or a later date.")
    if amount > available(acc):
        raise conflict(
            f"Insufficient funds in {acc['account_id']}: available "
            f"{available(acc):.2f} {acc['currency']}, requested {amount:.2f}."
        )
    payee = args["payee"]["name"]
    if day_offset(day) == 0:
        pid = post(world, acc, -amount, "utilities", f"Bill payment: {payee}", day)
        status = "paid"
    else:
        pid, status = world.next_id("PAY"), "scheduled"
    return {
        "payment_id": pid,
        "status": status,
        "payee": payee,
        "amount": amount,
        "pay_on": day,
        "balance_after": acc["balance"],
    }
