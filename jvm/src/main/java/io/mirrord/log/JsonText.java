package io.mirrord.log;

import java.util.Locale;

/** A string as a JSON string literal, for the JSON the supervisor reads (totals, positions). */
public final class JsonText {
    private JsonText() {
    }

    /** Appends {@code s}, quoted and escaped, to {@code json}. */
    public static void appendString(StringBuilder json, String s) {
        json.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> json.append("\\\"");
                case '\\' -> json.append("\\\\");
                case '\n' -> json.append("\\n");
                case '\r' -> json.append("\\r");
                case '\t' -> json.append("\\t");
                default -> {
                    if (c < 0x20) {
                        json.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    } else {
                        json.append(c);
                    }
                }
            }
        }
        json.append('"');
    }
}
