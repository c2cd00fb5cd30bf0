"""One valid call per tool, drawn from a world, that succeeds when run in order on a fresh World.

Used by tests and by simulator calibration (real executor output to compare against). Later
calls may depend on earlier writes (e.g. cancel_booking cancels the booking book_flight made).
"""

from __future__ import annotations

from slca.tools.flights import flight_status
from slca.tools.world import HORIZON_DAYS, World, shift_day


def example_calls(world: World) -> list[tuple[str, dict]]:
    """Ordered (tool name, arguments) pairs covering every tool in the catalog."""
    return _weather() + _flights(world) + _banking(world) + _calendar(world) + _retail(world) + _math() + _science()


def _weather() -> list[tuple[str, dict]]:
    trigger = {"metric": "wind_kph", "operator": "above", "threshold": 30}
    return [
        ("get_current_weather", {"city": "Lima", "units": "fahrenheit"}),
        ("get_forecast", {"city": "Paris", "days": 3, "include_precipitation": True}),
        ("get_historical_weather", {"city": "Tokyo", "date": shift_day(-5)}),
        ("get_air_quality", {"city": "Delhi", "include_advice": True}),
        ("compare_weather", {"cities": ["Lima", "Paris", "Tokyo"], "metric": "humidity"}),
        (
            "create_weather_alert",
            {"city": "Miami", "trigger": trigger, "notify": {"channel": "email", "contact": "ana@mail.example"}},
        ),
        ("list_weather_alerts", {"city": "Miami"}),
        ("delete_weather_alert", {"alert_id": "ALR-101"}),
    ]


def _flights(world: World) -> list[tuple[str, dict]]:
    day = shift_day(3)
    flight = next(
        f
        for f in world.copy().flights_on_route("LIM", "BOG", day)
        if flight_status(f) != "cancelled" and f["seats_left"] >= 2
    )
    people = [
        {"first_name": "Ana", "last_name": "Quispe", "seat_preference": "window"},
        {"first_name": "Luis", "last_name": "Quispe", "date_of_birth": "1990-04-12"},
    ]
    return [
        ("search_airports", {"query": "japan"}),
        (
            "search_flights",
            {"origin": "LIM", "destination": "BOG", "date": day, "passengers": 2, "sort_by": "departure_time"},
        ),
        ("get_flight_status", {"flight_id": flight["flight_id"]}),
        (
            "book_flight",
            {
                "flight_id": flight["flight_id"],
                "cabin": "economy",
                "passengers": people,
                "payment": {"method": "credit_card", "card_last4": "4242"},
                "checked_bags": 1,
            },
        ),
        ("get_booking", {"booking_id": "BKG-9001"}),
        ("cancel_booking", {"booking_id": "BKG-9001", "reason": "change_of_plans"}),
    ]


def _banking(world: World) -> list[tuple[str, dict]]:
    first, second = list(world.bank_customers.values())[:2]
    src = f"ACC-{first['customer_id'][4:]}0"  # every customer's checking account ends in 0
    dst = f"ACC-{second['customer_id'][4:]}0"
    return [
        ("find_customer", {"name": first["name"].split()[1]}),
        ("list_accounts", {"customer_id": first["customer_id"]}),
        ("get_balance", {"account_id": src}),
        ("get_transactions", {"account_id": src, "start_date": shift_day(-30), "limit": 5}),
        ("transfer_funds", {"from_account_id": src, "to_account_id": dst, "amount": 5.0, "memo": "Dinner"}),
        ("pay_bill", {"account_id": src, "payee": {"name": "electricity", "reference": "12345678"}, "amount": 7.5}),
    ]


def _calendar(world: World) -> list[tuple[str, dict]]:
    free_day = shift_day(HORIZON_DAYS + 1)  # the seeded calendar ends before this day
    return [
        ("list_events", {"date": shift_day(1)}),
        ("get_event", {"event_id": next(iter(world.events))}),
        (
            "find_free_slots",
            {"date": shift_day(2), "duration_min": 30, "working_hours": {"start": "08:00", "end": "18:00"}},
        ),
        (
            "create_event",
            {
                "title": "Planning",
                "date": free_day,
                "start_time": "10:00",
                "duration_min": 60,
                "calendar": "work",
                "location": "Room A",
                "attendees": [world.contacts[0]["email"]],
                "reminder": {"minutes_before": 10, "method": "email"},
            },
        ),
        ("reschedule_event", {"event_id": "EVT-9001", "new_date": free_day, "new_start_time": "13:00"}),
        ("delete_event", {"event_id": "EVT-9001", "notify_attendees": True}),
    ]


def _retail(world: World) -> list[tuple[str, dict]]:
    shopper = next(iter(world.shoppers.values()))
    product = next(p for p in world.products.values() if p["stock"] > 0)
    delivered = next(o for o in world.orders.values() if o["status"] == "delivered")
    address = {"street": "12 Harbor Road", "city": "Lima", "postal_code": "15001"}
    return [
        ("search_products", {"query": "headphones", "sort_by": "price_asc"}),
        ("get_product", {"product_id": product["product_id"]}),
        ("list_orders", {"email": shopper["email"]}),
        ("get_order", {"order_id": delivered["order_id"]}),
        (
            "place_order",
            {
                "email": shopper["email"],
                "items": [{"product_id": product["product_id"], "quantity": 1}],
                "shipping": {"method": "express", "address": address},
                "gift_wrap": True,
            },
        ),
        ("cancel_order", {"order_id": "ORD-9001", "reason": "ordered_by_mistake"}),
        (
            "return_item",
            {"order_id": delivered["order_id"], "item_id": delivered["items"][0]["item_id"], "reason": "damaged"},
        ),
    ]


def _math() -> list[tuple[str, dict]]:
    return [
        ("calculate", {"expression": "(12.5 + 7) * 3 / 2", "precision": 2}),
        ("convert_units", {"value": 5, "from_unit": "mile", "to_unit": "kilometer"}),
        ("list_units", {"dimension": "mass"}),
        ("convert_currency", {"amount": 100, "from_currency": "USD", "to_currency": "EUR"}),
        ("compute_statistics", {"values": [3, 1, 4, 1, 5, 9], "measures": ["mean", "median", "stdev"]}),
        ("loan_payment", {"principal": 250000, "annual_rate_percent": 6.5, "years": 30}),
        ("split_bill", {"total": 120.5, "people": 4, "tip_percent": 18, "round_up": True}),
    ]


def _science() -> list[tuple[str, dict]]:
    return [
        ("triangle_area", {"base": 10, "height": 5}),
        ("circle_area", {"radius": 2.5, "precision": 2}),
        ("hypotenuse", {"a": 3, "b": 4}),
        ("factorial", {"n": 5}),
        ("quadratic_roots", {"a": 1, "b": -3, "c": 2}),
        ("kinetic_energy", {"mass_kg": 2, "velocity_ms": 3}),
        ("greatest_common_divisor", {"a": 48, "b": 18}),
    ]
