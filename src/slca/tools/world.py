"""Seeded in-memory world state that the tool executors read and mutate.

`World(seed)` builds banking customers/accounts/transactions, a calendar, retail
customers/products/orders and exchange rates from one `random.Random(seed)`; weather and flights
are derived on demand from (seed, key) so every city/date/route exists without being stored.
Same seed -> identical world; `copy()` gives an independent deep copy.
"""

from __future__ import annotations

import math
import pickle
import random
from datetime import date, timedelta

from slca.tools import entities as E

TODAY = date(2025, 6, 2)
HISTORY_DAYS = 30  # weather and transactions reach this far back
HORIZON_DAYS = 14  # forecasts, flights and calendar reach this far ahead

CONDITIONS = ("sunny", "partly_cloudy", "cloudy", "rain", "thunderstorm", "snow", "fog")
CITY_BY_NAME = {c[0].lower(): c for c in E.CITIES}
CITY_BY_CODE = {c[2]: c for c in E.CITIES}


def keyed_rng(seed: int, *parts: object) -> random.Random:
    """A generator determined by the seed and a key (str seeding is stable across processes)."""
    return random.Random("|".join([str(seed), *map(str, parts)]))


def day_offset(day: str) -> int:
    return (date.fromisoformat(day) - TODAY).days


def shift_day(days: int) -> str:
    return (TODAY + timedelta(days=days)).isoformat()


def distance_km(a: tuple, b: tuple) -> float:
    """Great-circle distance between two city rows (haversine)."""
    lat1, lon1, lat2, lon2 = map(math.radians, (a[3], a[4], b[3], b[4]))
    h = math.sin((lat2 - lat1) / 2) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    return 2 * 6371.0 * math.asin(math.sqrt(h))


class World:
    """All domains' state for one task; built in a few milliseconds."""

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)
        self.today = TODAY.isoformat()
        rng = random.Random(self.seed)
        people = self._people(rng, 90)
        self.rates = {
            cur: round(r * rng.uniform(0.97, 1.03), 6) if cur != "USD" else 1.0 for cur, r in E.CURRENCY_RATES.items()
        }
        self.weather_alerts: dict[str, dict] = {}
        self.flights: dict[str, dict] = {}  # cache of generated flights, mutated by bookings
        self.bookings: dict[str, dict] = {}
        self.bank_customers: dict[str, dict] = {}
        self.accounts: dict[str, dict] = {}
        self.transactions: dict[str, list[dict]] = {}
        self._build_bank(rng, people[:32])
        self.contacts = [{"name": n, "email": _email(n, "mail.example")} for n in people[32:52]]
        self.events: dict[str, dict] = {}
        self._build_calendar(rng)
        self.products: dict[str, dict] = {}
        self.shoppers: dict[str, dict] = {}
        self.orders: dict[str, dict] = {}
        self._build_retail(rng, people[52:90])
        self.counters: dict[str, int] = {}

    def copy(self) -> World:
        """Independent deep copy (state is plain data, and pickling is ~4x faster than deepcopy)."""
        return pickle.loads(pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL))

    def next_id(self, prefix: str, start: int = 9001) -> str:
        """Deterministic id for a newly created record (same call sequence -> same ids)."""
        n = self.counters.get(prefix, start)
        self.counters[prefix] = n + 1
        return f"{prefix}-{n}"

    # ---- weather (derived) ----
    def weather_on(self, city_row: tuple, day: str) -> dict:
        """Daily weather for a city on a date within the history/horizon window."""
        name, _, _, _, _, base, wet = city_row
        rng = keyed_rng(self.seed, "weather", name, day)
        drift = 2.5 * math.sin(day_offset(day) / 5.0 + len(name))
        high = round(base + 4 + drift + rng.uniform(-3, 3), 1)
        low = round(high - rng.uniform(5, 11), 1)
        precip = round(min(100.0, max(0.0, 100 * (wet + rng.uniform(-0.35, 0.35)))))
        if precip >= 60:
            cond = "snow" if high < 2 else ("thunderstorm" if high > 24 and rng.random() < 0.4 else "rain")
        elif precip >= 40:
            cond = rng.choice(("cloudy", "fog")) if high < 18 else "cloudy"
        else:
            cond = "sunny" if precip < 20 else "partly_cloudy"
        return {
            "date": day,
            "high_c": high,
            "low_c": low,
            "condition": cond,
            "precipitation_chance": precip,
            "humidity": int(min(100, 30 + 60 * wet + rng.uniform(-10, 10))),
            "wind_kph": round(rng.uniform(3, 35), 1),
        }

    def air_quality(self, city_row: tuple) -> dict:
        rng = keyed_rng(self.seed, "aqi", city_row[0])
        aqi = int(rng.uniform(15, 180))
        return {"aqi": aqi, "pollutant": rng.choice(("pm2_5", "pm10", "ozone", "no2"))}

    # ---- flights (derived, cached once seen so bookings persist) ----
    def flights_on_route(self, origin: str, destination: str, day: str) -> list[dict]:
        """All flights on a route and day; ids encode route and date so they can be re-derived."""
        rng = keyed_rng(self.seed, "flights", origin, destination, day)
        km = distance_km(CITY_BY_CODE[origin], CITY_BY_CODE[destination])
        out = []
        for k in range(1, rng.randint(2, 5) + 1):
            fid = f"FL-{origin}-{destination}-{day.replace('-', '')}-{k}"
            made = self._make_flight(rng, fid, origin, destination, day, km)
            out.append(self.flights.setdefault(fid, made))  # a cached flight keeps its bookings
        return sorted(out, key=lambda f: f["departure_time"])

    def flight(self, flight_id: str) -> dict | None:
        if flight_id not in self.flights:
            parts = flight_id.split("-")
            if (
                len(parts) != 5
                or parts[0] != "FL"
                or parts[1] not in CITY_BY_CODE
                or parts[2] not in CITY_BY_CODE
                or parts[1] == parts[2]
            ):
                return None
            try:
                day = date(int(parts[3][:4]), int(parts[3][4:6]), int(parts[3][6:])).isoformat()
            except ValueError:
                return None
            if not 0 <= day_offset(day) <= HORIZON_DAYS:
                return None
            self.flights_on_route(parts[1], parts[2], day)
        return self.flights.get(flight_id)

    @staticmethod
    def _make_flight(rng: random.Random, fid: str, origin: str, dest: str, day: str, km: float) -> dict:
        code, airline = rng.choice(E.AIRLINES)
        stops = 0 if km < 2500 or rng.random() < 0.45 else rng.choice((1, 1, 2))
        minutes = int(km / 13.5 + 40 + stops * rng.randint(60, 150))
        dep = rng.randint(5 * 12, 22 * 12) * 5  # minutes after midnight, on a 5-minute grid
        arr = dep + minutes
        base = 45 + km * rng.uniform(0.06, 0.11) - stops * 25
        return {
            "flight_id": fid,
            "flight_number": f"{code}{rng.randint(100, 9899)}",
            "airline": airline,
            "origin": origin,
            "destination": dest,
            "date": day,
            "departure_time": f"{dep // 60:02d}:{dep % 60:02d}",
            "arrival_time": f"{arr // 60 % 24:02d}:{arr % 60:02d}",
            "arrives_next_day": arr >= 24 * 60,
            "duration_min": minutes,
            "stops": stops,
            "prices": {
                "economy": round(max(39.0, base), 2),
                "premium_economy": round(max(39.0, base) * 1.6, 2),
                "business": round(max(39.0, base) * 3.2, 2),
            },
            "seats_left": rng.randint(0, 40),
            "status_seed": rng.random(),
        }

    # ---- builders ----
    @staticmethod
    def _people(rng: random.Random, n: int) -> list[str]:
        combos = [f"{first} {last}" for first in E.FIRST_NAMES for last in E.LAST_NAMES]
        return rng.sample(combos, n)

    def _build_bank(self, rng: random.Random, names: list[str]) -> None:
        for i, name in enumerate(names):
            cid = f"CUS-{1001 + i}"
            self.bank_customers[cid] = {"customer_id": cid, "name": name, "email": _email(name, "bank.example")}
            kinds = ["checking"] + rng.sample(["savings", "credit", "investment"], rng.randint(0, 2))
            for j, kind in enumerate(kinds):
                aid = f"ACC-{(1001 + i) * 10 + j}"
                currency = rng.choice(("USD", "USD", "USD", "EUR", "GBP"))
                balance = round(rng.uniform(-2500, 0) if kind == "credit" else rng.uniform(40, 25000), 2)
                self.accounts[aid] = {
                    "account_id": aid,
                    "customer_id": cid,
                    "type": kind,
                    "currency": currency,
                    "nickname": f"{name.split()[0]}'s {kind}",
                    "balance": balance,
                    "credit_limit": 5000.0 if kind == "credit" else 0.0,
                }
                self.transactions[aid] = self._history(rng, aid, kind)

    def _history(self, rng: random.Random, aid: str, kind: str) -> list[dict]:
        txns = []
        for k in range(rng.randint(4, 10)):
            cat = "salary" if kind == "checking" and k == 0 else rng.choice(E.TXN_CATEGORIES[:8])
            amount = round(rng.uniform(1500, 5000) if cat == "salary" else -rng.uniform(3, 400), 2)
            txns.append(
                {
                    "transaction_id": f"TXN-{aid[4:]}-{k + 1:02d}",
                    "date": shift_day(-rng.randint(0, HISTORY_DAYS)),
                    "amount": amount,
                    "category": cat,
                    "description": rng.choice(E.MERCHANTS[cat]),
                }
            )
        return sorted(txns, key=lambda t: (t["date"], t["transaction_id"]), reverse=True)

    def _build_calendar(self, rng: random.Random) -> None:
        for day_i in range(-3, HORIZON_DAYS + 1):
            day = shift_day(day_i)
            starts = sorted(rng.sample(range(8 * 2, 19 * 2), rng.randint(0, 3)))
            busy_until = 0
            for slot in starts:
                start = max(slot * 30, busy_until)
                duration = rng.choice((30, 30, 45, 60, 60, 90))
                if start + duration > 20 * 60:
                    continue
                busy_until = start + duration
                eid = f"EVT-{len(self.events) + 101}"
                self.events[eid] = {
                    "event_id": eid,
                    "title": rng.choice(E.EVENT_TITLES),
                    "date": day,
                    "start_time": _hhmm(start),
                    "end_time": _hhmm(start + duration),
                    "duration_min": duration,
                    "calendar": rng.choice(("work", "work", "personal", "family")),
                    "location": rng.choice(E.LOCATIONS),
                    "attendees": [c["email"] for c in rng.sample(self.contacts, rng.randint(0, 3))],
                }

    def _build_retail(self, rng: random.Random, names: list[str]) -> None:
        for i, (name, cat, price) in enumerate(E.PRODUCTS):
            pid = f"PRD-{301 + i}"
            self.products[pid] = {
                "product_id": pid,
                "name": name,
                "category": cat,
                "price": round(price * rng.uniform(0.9, 1.1), 2),
                "stock": rng.choice((0, 3, 8, 15, 25, 40)),
                "rating": round(rng.uniform(3.0, 5.0), 1),
            }
        pids = list(self.products)
        for i, name in enumerate(names):
            sid = f"SHP-{501 + i}"
            city = rng.choice(E.CITIES)[0]
            self.shoppers[sid] = {"customer_id": sid, "name": name, "email": _email(name, "shop.example"), "city": city}
            for _ in range(rng.randint(1, 2)):
                self._seed_order(rng, sid, rng.sample(pids, rng.randint(1, 3)))

    def _seed_order(self, rng: random.Random, sid: str, pids: list[str]) -> None:
        oid = f"ORD-{7001 + len(self.orders)}"
        items = []
        for k, pid in enumerate(pids):
            p = self.products[pid]
            items.append(
                {
                    "item_id": f"{oid}-{k + 1}",
                    "product_id": pid,
                    "name": p["name"],
                    "quantity": rng.randint(1, 3),
                    "unit_price": p["price"],
                    "returned_quantity": 0,
                }
            )
        status = rng.choice(("processing", "shipped", "delivered", "delivered", "cancelled"))
        self.orders[oid] = {
            "order_id": oid,
            "customer_id": sid,
            "status": status,
            "placed_on": shift_day(-rng.randint(1, HISTORY_DAYS)),
            "items": items,
            "shipping_method": rng.choice(("standard", "express")),
            "total": round(sum(it["quantity"] * it["unit_price"] for it in items), 2),
        }


def _email(name: str, domain: str) -> str:
    return f"{name.lower().replace(' ', '.')}@{domain}"


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"
