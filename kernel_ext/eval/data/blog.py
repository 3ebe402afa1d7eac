"""The blog: users write posts, and comment on them (B-UML in Python, as a notebook cell writes it)."""
from besser.BUML.metamodel.structural import (
    BinaryAssociation,
    BooleanType,
    Class,
    DomainModel,
    Multiplicity,
    Property,
    StringType,
)

user = Class(name="User", attributes={
    Property(name="username", type=StringType),
    Property(name="email", type=StringType),
})
post = Class(name="Post", attributes={
    Property(name="title", type=StringType),
    Property(name="body", type=StringType),
    Property(name="published", type=BooleanType),
})
comment = Class(name="Comment", attributes={
    Property(name="text", type=StringType),
})
writes = BinaryAssociation(name="Writes", ends={
    Property(name="author", type=user, multiplicity=Multiplicity(1, 1)),
    Property(name="posts", type=post, multiplicity=Multiplicity(0, "*")),
})
discusses = BinaryAssociation(name="Discusses", ends={
    Property(name="post", type=post, multiplicity=Multiplicity(1, 1)),
    Property(name="comments", type=comment, multiplicity=Multiplicity(0, "*")),
})
comments_by = BinaryAssociation(name="Remarks", ends={
    Property(name="commenter", type=user, multiplicity=Multiplicity(1, 1)),
    Property(name="remarks", type=comment, multiplicity=Multiplicity(0, "*")),
})
blog = DomainModel(name="Blog", types={user, post, comment}, associations={writes, discusses, comments_by})
